"""Oracles: the reference method that labels the frames active learning picks (any ASE calculator).

Built in: GFN2-xTB through tblite (:func:`gfn2_xtb`, the default: milliseconds per call for molecules of
tens of atoms) and Kohn-Sham DFT through PySCF (:mod:`sciml.active.dft`, e.g. PBE/def2-SVP with density
fitting). Both install with ``pip install 'sciml[oracle]'``; without them the error says so.

:meth:`~sciml.active.Oracle.label` returns a copy of the frame with energy (eV) and forces (eV/Å) as a single-point
result, or raises :class:`OracleFailure` (an exception in the calculator, an SCF that did not converge,
non-finite results), which the loop records and skips.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial

import numpy as np
from ase import Atoms
from ase.calculators.calculator import Calculator
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.active.label_cache import LabelCache
from sciml.calculators.baseline import baseline_calculator, baseline_spec

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
    when ``fresh``, so that a failed SCF leaves nothing behind for the next frame); ``baseline``: the method as a
    checkpoint stores it (:func:`~sciml.calculators.baseline.baseline_spec`) where a model of a difference to
    this oracle can carry it (``None``: it cannot be a baseline). With a ``cache``
    (:class:`~sciml.active.label_cache.LabelCache`), a frame labelled before under this name is read back
    instead of computed, and every new label is written to it. An oracle pickles (its calculator left behind),
    so that an executor's worker process can label with it."""

    def __init__(
        self,
        name: str,
        factory: Callable[[], Calculator],
        fresh: bool = False,
        cache: LabelCache | None = None,
        baseline: dict | None = None,
    ) -> None:
        self.name, self.factory, self.fresh, self.cache, self.baseline = name, factory, fresh, cache, baseline
        self._calculator: Calculator | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_calculator": None}

    def label(self, atoms: Atoms) -> Atoms:
        """A copy of ``atoms`` with the oracle's energy (eV) and forces (eV/Å) attached."""
        if self.cache is not None:
            cached = self.cache.read(atoms, self.name)
            if cached is not None:
                return cached
        labelled = self.compute(atoms)
        if self.cache is not None:
            self.cache.write(labelled, self.name)
        return labelled

    def compute(self, atoms: Atoms) -> Atoms:
        """:meth:`label` without the cache."""
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
    require("tblite.ase", "the GFN2-xTB oracle")
    spec = baseline_spec("GFN2-xTB", accuracy=accuracy, electronic_temperature=electronic_temperature)
    return Oracle("GFN2-xTB", partial(baseline_calculator, spec), baseline=spec)


def pyscf_dft(**options) -> Oracle:
    """Kohn-Sham DFT through PySCF: :func:`sciml.active.dft.pyscf_dft` (imported when called)."""
    from sciml.active.dft import pyscf_dft as dft_oracle

    return dft_oracle(**options)


#: The oracles ``sciml learn --oracle`` names.
ORACLES: dict[str, Callable[[], Oracle]] = {"gfn2-xtb": gfn2_xtb, "pyscf": pyscf_dft}


def oracle_by_name(name: str, **options) -> Oracle:
    """One of the built-in oracles in ``ORACLES`` (``"gfn2-xtb"``, ``"pyscf"``) built with ``options``."""
    if name not in ORACLES:
        raise ValueError(f"unknown oracle '{name}'; choose one of {sorted(ORACLES)}")
    return ORACLES[name](**options)
