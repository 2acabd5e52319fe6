"""Oracles: the reference method that labels the frames active learning picks (any ASE calculator).

Built in: GFN2-xTB through tblite (:func:`gfn2_xtb`, the default: milliseconds per call for molecules of
tens of atoms) and Kohn-Sham DFT through PySCF (:func:`pyscf_dft`, e.g. PBE/def2-SVP). Both install with
``pip install 'sciml[oracle]'``; without them the error says so.

:meth:`~sciml.active.Oracle.label` returns a copy of the frame with energy (eV) and forces (eV/Å) as a single-point
result, or raises :class:`OracleFailure` (an exception in the calculator, an SCF that did not converge,
non-finite results), which the loop records and skips.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import numpy as np
from ase import Atoms, units
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.singlepoint import SinglePointCalculator

EXTRA = "pip install 'sciml[oracle]'"


class OracleFailure(RuntimeError):
    """The oracle could not label a frame; the message says why."""


def require(module: str, purpose: str):
    """Import ``module`` or raise an ImportError that names the extra to install for ``purpose``."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f"{purpose} needs the '{module.split('.')[0]}' package: {EXTRA}") from error


class Oracle:
    """A named ASE calculator used as the reference; ``factory()`` builds a fresh calculator (one per frame
    when ``fresh``, so that a failed SCF leaves nothing behind for the next frame)."""

    def __init__(self, name: str, factory: Callable[[], Calculator], fresh: bool = False) -> None:
        self.name, self.factory, self.fresh = name, factory, fresh
        self._calculator: Calculator | None = None

    def label(self, atoms: Atoms) -> Atoms:
        """A copy of ``atoms`` with the oracle's energy (eV) and forces (eV/Å) attached."""
        if self._calculator is None or self.fresh:
            self._calculator = self.factory()
        labelled = atoms.copy()
        labelled.calc = self._calculator
        try:
            energy = float(labelled.get_potential_energy())
            forces = np.array(labelled.get_forces(), dtype=float)
        except Exception as error:  # any failure of the method is the oracle's, recorded by the caller
            self._calculator = None  # a calculator left in a failed state is not reused
            raise OracleFailure(f"{self.name}: {type(error).__name__}: {error}") from error
        if not np.isfinite(energy) or not np.all(np.isfinite(forces)):
            raise OracleFailure(f"{self.name}: non-finite energy or forces")
        labelled.calc = SinglePointCalculator(labelled, energy=energy, forces=forces)
        return labelled


def gfn2_xtb(accuracy: float = 1.0, electronic_temperature: float = 300.0) -> Oracle:
    """GFN2-xTB (Bannwarth, Ehlert, Grimme, J. Chem. Theory Comput. 15, 1652 (2019)) through tblite's ASE
    calculator; ``electronic_temperature`` in K."""
    module = require("tblite.ase", "the GFN2-xTB oracle")
    return Oracle(
        "GFN2-xTB",
        lambda: module.TBLite(
            method="GFN2-xTB", accuracy=accuracy, electronic_temperature=electronic_temperature, verbosity=0
        ),
    )


class PySCFCalculator(Calculator):
    """Restricted (``spin=0``) or unrestricted Kohn-Sham DFT of a molecule with PySCF: energy (eV) and forces
    (eV/Å) from analytic gradients. An SCF that does not converge in ``max_cycle`` iterations raises."""

    implemented_properties = ["energy", "forces"]

    def __init__(
        self,
        xc: str = "PBE",
        basis: str = "def2-SVP",
        charge: int = 0,
        spin: int = 0,
        max_cycle: int = 100,
        conv_tol: float = 1e-9,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.pyscf = require("pyscf", "the PySCF oracle")
        self.xc, self.basis, self.charge, self.spin = xc, basis, charge, spin
        self.max_cycle, self.conv_tol = max_cycle, conv_tol

    def calculate(self, atoms: Atoms | None = None, properties=("energy",), system_changes=all_changes) -> None:
        super().calculate(atoms, properties, system_changes)
        from pyscf import dft, gto

        molecule = gto.M(
            atom=[(symbol, tuple(position)) for symbol, position in zip(
                self.atoms.get_chemical_symbols(), self.atoms.positions, strict=True)],
            basis=self.basis, charge=self.charge, spin=self.spin, unit="Angstrom", verbose=0,
        )  # fmt: skip
        method = dft.RKS(molecule) if self.spin == 0 else dft.UKS(molecule)
        method.xc, method.max_cycle, method.conv_tol = self.xc, self.max_cycle, self.conv_tol
        energy = method.kernel()
        if not method.converged:
            raise RuntimeError(f"SCF not converged in {self.max_cycle} cycles ({self.xc}/{self.basis})")
        gradient = method.nuc_grad_method().kernel()  # Hartree/Bohr
        self.results["energy"] = float(energy) * units.Hartree
        self.results["forces"] = -np.asarray(gradient) * units.Hartree / units.Bohr


def pyscf_dft(xc: str = "PBE", basis: str = "def2-SVP", charge: int = 0, spin: int = 0, max_cycle: int = 100) -> Oracle:
    """Kohn-Sham DFT through PySCF (:class:`PySCFCalculator`), a fresh calculator per frame."""
    require("pyscf", "the PySCF oracle")
    return Oracle(
        f"PySCF {xc}/{basis}",
        lambda: PySCFCalculator(xc=xc, basis=basis, charge=charge, spin=spin, max_cycle=max_cycle),
        fresh=True,
    )


#: The oracles ``sciml learn --oracle`` names.
ORACLES: dict[str, Callable[[], Oracle]] = {"gfn2-xtb": gfn2_xtb, "pyscf": pyscf_dft}


def oracle_by_name(name: str, **options) -> Oracle:
    """One of the built-in oracles in ``ORACLES`` (``"gfn2-xtb"``, ``"pyscf"``) built with ``options``."""
    if name not in ORACLES:
        raise ValueError(f"unknown oracle '{name}'; choose one of {sorted(ORACLES)}")
    return ORACLES[name](**options)
