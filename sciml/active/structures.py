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
    Chem = require("rdkit.Chem", "a start from a SMILES string")
    from rdkit.Chem import AllChem

    molecule = Chem.MolFromSmiles(smiles)
    if molecule is None:
        raise ValueError(f"RDKit cannot parse the SMILES string '{smiles}'")
    molecule = Chem.AddHs(molecule)
    parameters = AllChem.ETKDGv3()
    parameters.randomSeed = seed
    if AllChem.EmbedMolecule(molecule, parameters) != 0:
        raise ValueError(f"RDKit's ETKDG found no 3D embedding of '{smiles}'")
    if AllChem.MMFFHasAllMoleculeParams(molecule):
        AllChem.MMFFOptimizeMolecule(molecule, maxIters=2000)
    numbers = [atom.GetAtomicNum() for atom in molecule.GetAtoms()]
    atoms = Atoms(numbers=numbers, positions=molecule.GetConformer().GetPositions())
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
