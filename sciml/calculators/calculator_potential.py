"""``CalculatorPotential``: any ASE calculator (a reference method such as GFN2-xTB) as the potential of the
MD engine (:func:`~sciml.md.engine.run_replicas`), so that the reference method's own MD runs with the same
integrator, thermostat, noise and trajectory files as a trained potential's.

The R replicas are evaluated one structure at a time (an ASE calculator takes one), split over ``workers``
processes (forked; each builds its own calculator once and keeps it, and runs one OpenMP thread).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable

import numpy as np
import torch
from ase import Atoms
from ase.calculators.calculator import Calculator

_worker: dict = {}


class CalculatorPotential:
    """``potential(positions)`` with positions (R, N, 3) Å returns ``(energy (R,) eV, forces (R, N, 3) eV/Å)``
    (float64) from a calculator ``factory()`` (called once per worker) on copies of ``start`` (numbers, cell,
    pbc). ``workers`` > 1 evaluates the replicas in that many forked processes; call :meth:`close` (or use
    ``with``) to end them. A calculator that fails raises ``RuntimeError`` naming the replica. A calculator
    that reports ``forces_uncertainty`` (N,) eV/Å makes :meth:`forces_uncertainty` available."""

    def __init__(self, factory: Callable[[], Calculator], start: Atoms, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.start = start.copy()
        self.start.calc = None
        self.latest_uncertainty: np.ndarray | None = None
        if workers == 1:
            self.atoms = start.copy()
            self.atoms.calc = factory()
            self.pool = None
        else:
            context = multiprocessing.get_context("fork")
            self.pool = context.Pool(workers, initializer=_initialise, initargs=(factory, self.start, 1))

    def __call__(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        array = positions.detach().cpu().double().numpy()
        if array.shape[1:] != (len(self.start), 3):
            raise ValueError(f"positions hold {array.shape[1]} atoms per replica, the system has {len(self.start)}")
        jobs = [(r, array[r]) for r in range(len(array))]
        if self.pool is None:
            results = [evaluate(self.atoms, *job) for job in jobs]
        else:
            results = self.pool.map(_evaluate, jobs)
        energy = torch.tensor([e for e, _, _ in results], dtype=torch.float64, device=positions.device)
        forces = torch.tensor(np.stack([f for _, f, _ in results]), dtype=torch.float64, device=positions.device)
        uncertainties = [u for _, _, u in results]
        self.latest_uncertainty = None if any(u is None for u in uncertainties) else np.stack(uncertainties)
        return energy, forces

    def forces_uncertainty(self) -> torch.Tensor:
        """(R, N) per-atom force uncertainty (eV/Å) the calculator reported at the latest call."""
        if self.latest_uncertainty is None:
            raise ValueError("the calculator reports no forces_uncertainty (or the potential was not called yet)")
        return torch.tensor(self.latest_uncertainty, dtype=torch.float64)

    def close(self) -> None:
        """End the worker processes (nothing to do with one worker)."""
        if self.pool is not None:
            self.pool.close()
            self.pool.join()
            self.pool = None

    def __enter__(self) -> CalculatorPotential:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _initialise(factory: Callable[[], Calculator], start: Atoms, threads: int | None = None) -> None:
    if threads is not None:  # a forked worker: its OpenMP and BLAS pools (already loaded) limited to `threads`
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            pass
        else:
            threadpool_limits(threads)
    atoms = start.copy()
    atoms.calc = factory()
    _worker["atoms"] = atoms


def _evaluate(job: tuple[int, np.ndarray]) -> tuple[float, np.ndarray, np.ndarray | None]:
    return evaluate(_worker["atoms"], *job)


def evaluate(atoms: Atoms, replica: int, positions: np.ndarray) -> tuple[float, np.ndarray, np.ndarray | None]:
    """(energy eV, forces (N, 3) eV/Å, per-atom force uncertainty (N,) eV/Å or None) of ``atoms`` (calculator
    attached) at ``positions``; a failure raises ``RuntimeError`` naming ``replica``."""
    atoms.positions = positions
    try:
        energy = float(atoms.get_potential_energy())
        forces = np.array(atoms.get_forces(), dtype=float)
    except Exception as error:
        raise RuntimeError(f"the reference calculator failed on replica {replica}: {type(error).__name__}: "
                           f"{error}") from error  # fmt: skip
    if not np.isfinite(energy) or not np.all(np.isfinite(forces)):
        raise RuntimeError(f"the reference calculator returned non-finite results on replica {replica}")
    uncertainty = atoms.calc.results.get("forces_uncertainty")
    return energy, forces, None if uncertainty is None else np.array(uncertainty, dtype=float)
