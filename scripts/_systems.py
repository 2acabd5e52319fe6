"""The systems and models every benchmark times, built in one place so that the scripts time the same things.

Systems (ASE ``Atoms``; imports only ASE and numpy, so MACE's environment can build them too):
- :func:`molecule`: aspirin, 21 atoms, the first frame of the accuracy benchmark's 400 K test run;
- :func:`cu_crystal`: fcc Cu, a = 3.61 Å, cubic cells, rattled by 0.05 Å (a perfect lattice puts every atom on
  a site of high symmetry) with 300 K velocities; ~42 neighbours within 5 Å;
- :func:`liquid_box`: random positions in a periodic cube at fcc Cu's number density, with the cutoff that
  gives a chosen mean number of neighbours (the layer benchmarks).

Models: :func:`e2former`, a preset of ``E2Former`` (``medium`` = the defaults) with a random output head (speed
does not depend on training), on :data:`SPECIES`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ASPIRIN = ROOT / "data" / "aspirin_md" / "test_400K.extxyz"
SPECIES = [1, 6, 8, 29]  # aspirin's elements and copper: one model for every system
CU_LATTICE = 3.61  # Å
CU_DENSITY = 4 / CU_LATTICE**3  # atoms / Å^3


def molecule():
    """Aspirin (21 atoms) without a calculator, with 300 K velocities."""
    import ase.io
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

    atoms = ase.io.read(ASPIRIN, index=0)
    atoms.calc = None
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(0))
    return atoms


def ethanol():
    """Ethanol (9 atoms), the first frame of ``data/ethanol_gfn2.extxyz``, with 300 K velocities."""
    import ase.io
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

    atoms = ase.io.read(ROOT / "data" / "ethanol_gfn2.extxyz", index=0)
    atoms.calc = None
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(0))
    return atoms


PALMITIC_ACID = ROOT / "data" / "palmitic_acid.xyz"


def write_palmitic_acid() -> None:
    """``data/palmitic_acid.xyz``: palmitic acid, C16H32O2 (50 atoms, flexible), RDKit's ETKDG conformer
    (seed 0), MMFF-relaxed. Run in sciml's environment (RDKit); MACE's environment only reads the file."""
    import ase.io
    from ase import Atoms
    from rdkit import Chem
    from rdkit.Chem import AllChem

    molecule = Chem.AddHs(Chem.MolFromSmiles("CCCCCCCCCCCCCCCC(=O)O"))
    AllChem.EmbedMolecule(molecule, randomSeed=0)
    AllChem.MMFFOptimizeMolecule(molecule)
    atoms = Atoms([a.GetAtomicNum() for a in molecule.GetAtoms()], positions=molecule.GetConformer().GetPositions())
    atoms.info["source"] = "RDKit ETKDG (randomSeed 0) + MMFF94 of CCCCCCCCCCCCCCCC(=O)O (scripts/_systems.py)"
    ase.io.write(PALMITIC_ACID, atoms, format="extxyz")


def palmitic_acid():
    """Palmitic acid (50 atoms) from :func:`write_palmitic_acid`'s file, with 300 K velocities."""
    import ase.io
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

    atoms = ase.io.read(PALMITIC_ACID)
    atoms.calc = None
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(0))
    return atoms


def cu_crystal(n_atoms: int):
    """fcc Cu of ``n_atoms`` = 4 x a x b x c (cubic cells, the most cube-like repeats), rattled by 0.05 Å,
    with 300 K velocities."""
    from ase.build import bulk
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

    cells = n_atoms // 4
    if 4 * cells != n_atoms:
        raise ValueError(f"an fcc box has 4 atoms per cubic cell; {n_atoms} is not a multiple of 4")
    a = round(cells ** (1 / 3))
    while cells % a:
        a -= 1
    b = round((cells // a) ** 0.5)
    while (cells // a) % b:
        b -= 1
    atoms = bulk("Cu", "fcc", a=CU_LATTICE, cubic=True).repeat((a, b, cells // (a * b)))
    atoms.rattle(0.05, seed=0)
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(0))
    return atoms


def liquid_box(n_atoms: int, neighbours: int, seed: int = 0) -> tuple[dict, float]:
    """(frame record, cutoff Å): ``n_atoms`` Cu at random positions in a periodic cube at fcc Cu's density, and
    the cutoff that gives ``neighbours`` neighbours per atom on average."""
    rng = np.random.default_rng(seed)
    side = (n_atoms / CU_DENSITY) ** (1 / 3)
    cutoff = (3 * neighbours / (4 * math.pi * CU_DENSITY)) ** (1 / 3)
    record = {
        "positions": rng.random((n_atoms, 3)) * side,
        "numbers": np.full(n_atoms, 29),
        "cell": np.eye(3) * side,
        "pbc": np.ones(3, dtype=bool),
    }
    return record, cutoff


def e2former(preset: str = "medium", species: list[int] = SPECIES, cutoff: float = 5.0, seed: int = 0, **arguments):
    """``E2Former.preset(preset, species, cutoff=cutoff, **arguments)`` with a random output head, in eval mode."""
    import torch

    from sciml.models import E2Former
    from sciml.testing import randomise_output_head

    torch.manual_seed(seed)
    return randomise_output_head(E2Former.preset(preset, species, cutoff=cutoff, **arguments)).eval()
