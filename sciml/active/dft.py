"""Kohn-Sham DFT through PySCF as an oracle, at its best on a CPU: density fitting, the converged density of the
nearest frame already labelled as the initial guess, analytic gradients, and an optional dispersion correction.

- **Density fitting** (``density_fit``, on by default): the Coulomb and exchange integrals through an auxiliary
  basis (PySCF's default JK-fit basis for the orbital basis). It moves energies against the four-centre
  integrals by a nearly constant offset (the measured differences are in ``benchmarks/results/dft_oracle.md``);
  a store holds one :class:`DFTLevel`, named in its oracle field, so no two settings are mixed.
- **Initial guess** (``reuse_density``): the SCF starts from the converged density matrix of the frame labelled
  before whose positions are nearest (RMS displacement, same atoms in the same order), instead of a
  superposition of atomic densities. Frames an MD run picks lie close together, so fewer SCF cycles are needed;
  the converged result does not depend on the guess (to ``conv_tol``). The densities are kept in the
  calculator's process (the last ``densities_kept``).
- **Dispersion** (``dispersion``: ``"d3bj"``, ``"d4"``): Grimme's corrections through ``pyscf-dispersion``
  (simple-dftd3 and dftd4, the packages made for them), in the energy and its gradient.

``results["scf_cycles"]`` and ``results["guess"]`` (``"minao"`` or ``"nearest frame"``) say what a call cost.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import partial

import numpy as np
from ase import Atoms, units
from ase.calculators.calculator import Calculator, all_changes

from sciml.active.oracles import Oracle, require

DISPERSIONS = (None, "d3bj", "d4")


@dataclass(frozen=True)
class DFTLevel:
    """One level of theory and how it is computed.

    Attributes:
        xc, basis: the functional and the orbital basis (PySCF names: ``"PBE"``, ``"B3LYP"``, ``"def2-SVP"``).
        charge, spin: total charge and 2S (``spin`` 0: restricted Kohn-Sham; otherwise unrestricted).
        dispersion: ``None``, ``"d3bj"`` or ``"d4"``.
        density_fit: fit the two-electron integrals with PySCF's default auxiliary basis.
        conv_tol: SCF energy convergence (Ha); max_cycle: SCF iterations before the frame fails.
        grid_level: PySCF's DFT integration grid level (3 is its default).
    """

    xc: str = "PBE"
    basis: str = "def2-SVP"
    charge: int = 0
    spin: int = 0
    dispersion: str | None = None
    density_fit: bool = True
    conv_tol: float = 1e-9
    max_cycle: int = 100
    grid_level: int = 3

    def __post_init__(self) -> None:
        if self.dispersion not in DISPERSIONS:
            raise ValueError(f"dispersion must be one of {DISPERSIONS}, got '{self.dispersion}'")
        if self.max_cycle < 1 or not self.conv_tol > 0:
            raise ValueError(f"max_cycle must be >= 1 and conv_tol positive, got {self.max_cycle}, {self.conv_tol}")

    @property
    def name(self) -> str:
        """``PySCF PBE-D3(BJ)/def2-SVP (density fitting)``: what a store records as its oracle."""
        dispersion = {None: "", "d3bj": "-D3(BJ)", "d4": "-D4"}[self.dispersion]
        fitting = " (density fitting)" if self.density_fit else ""
        return f"PySCF {self.xc}{dispersion}/{self.basis}{fitting}"


class PySCFCalculator(Calculator):
    """Energy (eV) and forces (eV/Å, analytic gradients) of a molecule at ``level`` (:class:`DFTLevel`; the
    keyword arguments ``xc``, ``basis``, ... build one). An SCF that does not converge raises."""

    implemented_properties = ["energy", "forces"]

    def __init__(
        self, level: DFTLevel | None = None, reuse_density: bool = True, densities_kept: int = 32, **options
    ) -> None:
        fields = set(DFTLevel.__dataclass_fields__)
        level_options = {key: options.pop(key) for key in list(options) if key in fields}
        super().__init__(**options)
        require("pyscf", "the PySCF oracle")
        if level_options and level is not None:
            raise ValueError(f"give a level or its fields ({sorted(level_options)}), not both")
        self.level = level or DFTLevel(**level_options)
        if self.level.dispersion is not None:
            require("pyscf.dispersion", f"the {self.level.dispersion} dispersion correction")
        self.reuse_density = reuse_density
        self.densities: deque[tuple[np.ndarray, np.ndarray, np.ndarray]] = deque(maxlen=densities_kept)

    def calculate(self, atoms: Atoms | None = None, properties=("energy",), system_changes=all_changes) -> None:
        super().calculate(atoms, properties, system_changes)
        method = self.method(self.atoms)
        guess = self.nearest_density(self.atoms)
        cycles = []
        method.callback = lambda env: cycles.append(env.get("cycle"))
        energy = method.kernel(dm0=guess)
        if not method.converged:
            level = self.level
            raise RuntimeError(f"SCF not converged in {level.max_cycle} cycles ({level.xc}/{level.basis})")
        gradient = method.nuc_grad_method().kernel()  # Hartree/Bohr
        if self.reuse_density:
            self.densities.append((self.atoms.numbers.copy(), self.atoms.positions.copy(), method.make_rdm1()))
        self.results["energy"] = float(energy) * units.Hartree
        self.results["forces"] = -np.asarray(gradient) * units.Hartree / units.Bohr
        self.results["scf_cycles"] = len(cycles)
        self.results["guess"] = "minao" if guess is None else "nearest frame"

    def method(self, atoms: Atoms):
        """The PySCF Kohn-Sham object of ``atoms`` at the level (not yet run)."""
        from pyscf import dft, gto

        level = self.level
        molecule = gto.M(
            atom=[(symbol, tuple(position)) for symbol, position in zip(
                atoms.get_chemical_symbols(), atoms.positions, strict=True)],
            basis=level.basis, charge=level.charge, spin=level.spin, unit="Angstrom", verbose=0,
        )  # fmt: skip
        method = dft.RKS(molecule) if level.spin == 0 else dft.UKS(molecule)
        method.xc, method.max_cycle, method.conv_tol = level.xc, level.max_cycle, level.conv_tol
        method.grids.level = level.grid_level
        if level.dispersion is not None:
            method.disp = level.dispersion
        return method.density_fit() if level.density_fit else method

    def nearest_density(self, atoms: Atoms) -> np.ndarray | None:
        """The kept density matrix of the same atoms whose positions are nearest ``atoms``'s, or ``None``."""
        if not self.reuse_density:
            return None
        same = [(pos, dm) for numbers, pos, dm in self.densities if np.array_equal(numbers, atoms.numbers)]
        if not same:
            return None
        distances = [float(np.mean((pos - atoms.positions) ** 2)) for pos, _ in same]
        return same[int(np.argmin(distances))][1]


def pyscf_dft(level: DFTLevel | None = None, reuse_density: bool = True, **level_options) -> Oracle:
    """The PySCF oracle at ``level`` (or ``DFTLevel(**level_options)``: ``xc``, ``basis``, ``charge``, ``spin``,
    ``dispersion``, ``density_fit``, ``max_cycle``, ...), one calculator kept across frames for its densities
    (a failed SCF discards it, and with it nothing but the guesses)."""
    require("pyscf", "the PySCF oracle")
    level = level or DFTLevel(**level_options)
    return Oracle(level.name, partial(PySCFCalculator, level, reuse_density))
