"""Langevin MD of small molecules with GFN2-xTB energies and forces (tblite), written as extxyz.

Molecules are built offline from SMILES with RDKit (ETKDG embedding + MMFF relaxation).

    OMP_NUM_THREADS=1 python scripts/generate_molecular_md.py --smiles CCO --name ethanol \
        --steps 5000 --every 10 --temperature 500 --seed 0 --out data/ethanol_gfn2.extxyz
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # threads make tblite ~10x slower on a busy machine

import ase.io
import numpy as np
from _provenance import write_provenance
from ase import Atoms, units
from ase.calculators.singlepoint import SinglePointCalculator
from ase.constraints import FixCom
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution, Stationary, ZeroRotation
from rdkit import Chem
from rdkit.Chem import AllChem
from tblite.ase import TBLite


def molecule_from_smiles(smiles: str, seed: int) -> Atoms:
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    params = AllChem.ETKDGv3()
    params.randomSeed = seed
    if AllChem.EmbedMolecule(mol, params) != 0:
        raise RuntimeError(f"RDKit could not embed '{smiles}'")
    AllChem.MMFFOptimizeMolecule(mol)
    positions = mol.GetConformer().GetPositions()
    return Atoms(numbers=[a.GetAtomicNum() for a in mol.GetAtoms()], positions=positions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smiles", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--every", type=int, default=10, help="keep every n-th step")
    parser.add_argument("--timestep", type=float, default=0.5, help="fs")
    parser.add_argument("--temperature", type=float, default=500.0, help="K")
    parser.add_argument("--friction", type=float, default=0.01, help="1/fs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--equilibrate", type=int, default=0, help="steps run (and discarded) before recording")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    atoms = molecule_from_smiles(args.smiles, args.seed)
    atoms.calc = TBLite(method="GFN2-xTB", verbosity=0)
    MaxwellBoltzmannDistribution(atoms, temperature_K=args.temperature, rng=np.random.default_rng(args.seed))
    Stationary(atoms)
    ZeroRotation(atoms)
    atoms.set_constraint(FixCom())  # store unprojected forces below: get_forces(apply_constraint=False)
    dyn = Langevin(
        atoms,
        args.timestep * units.fs,
        temperature_K=args.temperature,
        friction=args.friction / units.fs,
        fixcm=False,
        rng=np.random.default_rng(args.seed + 1),
    )
    dyn.run(args.equilibrate)
    frames: list[Atoms] = []

    def record() -> None:
        frame = Atoms(atoms.numbers, atoms.positions)
        frame.calc = SinglePointCalculator(
            frame, energy=atoms.get_potential_energy(), forces=atoms.get_forces(apply_constraint=False)
        )
        frames.append(frame)

    dyn.attach(record, interval=args.every)
    start = time.perf_counter()
    dyn.run(args.steps)  # records every n-th step (and step 0 when not equilibrated first)
    elapsed = time.perf_counter() - start
    ase.io.write(args.out, frames, format="extxyz")
    write_provenance(
        args.out,
        method="GFN2-xTB (tblite 0.8.0), ase Langevin",
        smiles=args.smiles,
        molecule=args.name,
        temperature_K=args.temperature,
        timestep_fs=args.timestep,
        friction_per_fs=args.friction,
        steps=args.steps,
        equilibration_steps=args.equilibrate,
        keep_every=args.every,
        frames=len(frames),
        seed=args.seed,
        seconds=round(elapsed, 1),
        units="positions Å, energy eV, forces eV/Å",
    )
    print(f"{args.name}: {len(frames)} frames, {elapsed / args.steps * 1e3:.2f} ms/step -> {args.out}")


if __name__ == "__main__":
    main()
