"""Where active learning starts: a molecule from a SMILES string, a structure file, or a labelled dataset."""

from __future__ import annotations

from pathlib import Path

import ase.io
import numpy as np
from ase import Atoms

from sciml.active.oracles import require


def molecule_from_smiles(smiles: str, seed: int = 0) -> Atoms:
    """A 3D structure of ``smiles`` with its hydrogens: RDKit's ETKDG embedding (Riniker and Landrum, J. Chem.
    Inf. Model. 55, 2562 (2015)) relaxed with the MMFF94 force field. Positions in Å, no cell."""
    molecule = _with_hydrogens(smiles)  # first: it names the extra where RDKit is missing
    from rdkit.Chem import AllChem

    if AllChem.EmbedMolecule(molecule, _etkdg(seed)) != 0:
        raise ValueError(f"RDKit's ETKDG found no 3D embedding of '{smiles}'")
    if AllChem.MMFFHasAllMoleculeParams(molecule):
        AllChem.MMFFOptimizeMolecule(molecule, maxIters=2000)
    return _atoms(molecule, -1, smiles)


def conformers_from_smiles(smiles: str, count: int, seed: int = 0, min_rmsd: float = 0.3) -> list[Atoms]:
    """Up to ``count`` distinct conformers of ``smiles``: the first is :func:`molecule_from_smiles` (same
    ``seed``), the others the lowest-MMFF94-energy minima among ``max(20, 10 * count)`` more ETKDG embeddings
    whose best-alignment RMSD (hydrogens included, symmetry-equivalent atoms matched) to every conformer kept
    before is at least ``min_rmsd`` Å. Fewer come back when the molecule has fewer distinct minima (ethanol
    has 3: the two gauche and the trans OH rotamers). The others carry ``info["mmff_energy"]`` (kcal/mol)
    where MMFF94 has parameters. Several starts let exploration reach wells one start's MD does not cross into."""
    if count < 1:
        raise ValueError(f"conformers_from_smiles needs count >= 1, got {count}")
    first = molecule_from_smiles(smiles, seed)
    if count == 1:
        return [first]
    from rdkit.Chem import AllChem, rdMolAlign

    molecule = _with_hydrogens(smiles)
    ids = list(AllChem.EmbedMultipleConfs(molecule, max(20, 10 * count), _etkdg(seed + 1)))
    energies = [0.0] * len(ids)
    if AllChem.MMFFHasAllMoleculeParams(molecule):
        energies = [energy for _, energy in AllChem.MMFFOptimizeMoleculeConfs(molecule, maxIters=2000)]
    first_id = molecule.AddConformer(_conformer(first), assignId=True)
    kept: list[int] = [first_id]
    for k in sorted(range(len(ids)), key=lambda k: energies[k]):
        if len(kept) == count:
            break
        if all(rdMolAlign.GetBestRMS(molecule, molecule, other, ids[k]) >= min_rmsd for other in kept):
            kept.append(ids[k])
    others = []
    for conformer_id in kept[1:]:
        atoms = _atoms(molecule, conformer_id, smiles)
        atoms.info["mmff_energy"] = float(energies[ids.index(conformer_id)])
        others.append(atoms)
    return [first, *others]


def _with_hydrogens(smiles: str):
    Chem = require("rdkit.Chem", "a start from a SMILES string")
    molecule = Chem.MolFromSmiles(smiles)
    if molecule is None:
        raise ValueError(f"RDKit cannot parse the SMILES string '{smiles}'")
    return Chem.AddHs(molecule)


def _etkdg(seed: int):
    from rdkit.Chem import AllChem

    parameters = AllChem.ETKDGv3()
    parameters.randomSeed = seed
    return parameters


def _conformer(atoms: Atoms):
    """``atoms``' positions as an RDKit conformer (same atom order)."""
    from rdkit.Chem import Conformer
    from rdkit.Geometry import Point3D

    conformer = Conformer(len(atoms))
    for k, (x, y, z) in enumerate(atoms.positions):
        conformer.SetAtomPosition(k, Point3D(float(x), float(y), float(z)))
    return conformer


def _atoms(molecule, conformer_id: int, smiles: str) -> Atoms:
    numbers = [atom.GetAtomicNum() for atom in molecule.GetAtoms()]
    atoms = Atoms(numbers=numbers, positions=molecule.GetConformer(conformer_id).GetPositions())
    atoms.info["smiles"] = smiles
    return atoms


def read_structure(path: str | Path, index: int = -1) -> Atoms:
    """Frame ``index`` of a structure file ASE reads, without its labels (the oracle labels it)."""
    try:
        atoms = ase.io.read(path, index=index)
    except Exception as error:
        raise ValueError(f"cannot read a structure from '{path}' (frame {index}): {error}") from error
    return Atoms(atoms.numbers, atoms.positions, cell=atoms.cell, pbc=atoms.pbc)


def rattled_copies(atoms: Atoms, count: int, largest: float = 0.1, seed: int = 0) -> list[Atoms]:
    """``count`` copies of ``atoms`` with Gaussian displacements whose standard deviation rises evenly from
    ``largest / count`` to ``largest`` (Å): the seed set, near the start structure and around it."""
    rng = np.random.default_rng(seed)
    copies = []
    for k in range(count):
        copy = Atoms(atoms.numbers, atoms.positions, cell=atoms.cell, pbc=atoms.pbc)
        copy.positions += rng.normal(scale=largest * (k + 1) / count, size=copy.positions.shape)
        copies.append(copy)
    return copies
