"""Shared measurement helpers of the benchmark scripts: median wall time and peak memory of one call, and the
time of an ASE calculator per call and per MD step (these import only ASE, so MACE's environment runs them),
and the NequIP peer both MD benchmarks build.

Peak memory is measured in a fresh process per case: on CPU the resident-memory high-water mark
(VmHWM, reset before the measured call) above the resident memory before it, with glibc's mmap threshold
fixed at 64 KiB in that process so that freed large blocks leave the resident set (otherwise memory kept
from the warm-up call hides part of the peak); on CUDA the allocator's peak above what was allocated
before the call.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
from collections.abc import Callable

import torch


def median_time(run: Callable[[], None], repeats: int, device: str) -> float:
    """Median seconds of ``run()`` over ``repeats`` calls after one warm-up call."""
    run()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _worker(builder: Callable[..., Callable[[], None]], args: tuple, device: str, queue) -> None:
    from sciml.equivariant.kernels import load

    load(with_cuda=device == "cuda")
    run = builder(*args)
    run()  # warm-up: lazy initialisation must not count
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        run()
        queue.put(torch.cuda.max_memory_allocated() - before)
        return
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # reset VmHWM (Linux >= 4.0)
    before = _status_bytes("VmRSS")
    run()
    queue.put(max(_status_bytes("VmHWM") - before, 0))


def peak_memory(builder: Callable[..., Callable[[], None]], args: tuple, device: str) -> int:
    """Peak bytes of one ``builder(*args)()`` call, measured in a fresh process (see module docstring)."""
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"  # read by glibc when the spawned process starts
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_worker, args=(builder, args, device, queue))
    process.start()
    process.join()
    if process.exitcode != 0:
        raise RuntimeError(f"memory measurement of {builder.__name__}{args} failed (exit code {process.exitcode})")
    return queue.get(timeout=10)


def calculator_seconds(calculator, atoms, calls: int, warm: int = 3) -> float:
    """Median seconds of one energy + forces call of an ASE ``calculator`` on fixed positions, after ``warm``
    calls (kernels, neighbour list, allocator); the calculator may keep its neighbour list, as in MD."""
    from ase.calculators.calculator import all_changes

    times = []
    for i in range(warm + calls):
        start = time.perf_counter()
        calculator.calculate(atoms, ["energy", "forces"], all_changes)
        if i >= warm:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def verlet_seconds(calculator, atoms, steps: int) -> float:
    """Seconds per step of ASE velocity Verlet (1 fs) with ``calculator``, after two warm-up steps."""
    from ase import units
    from ase.md.verlet import VelocityVerlet

    atoms = atoms.copy()
    atoms.calc = calculator
    dynamics = VelocityVerlet(atoms, 1.0 * units.fs)
    dynamics.run(2)
    start = time.perf_counter()
    dynamics.run(steps)
    return (time.perf_counter() - start) / steps


def nequip_calculator(
    type_names: list[str], cutoff: float, layers: int, lmax: int, channels: int, dtype: str, avg_neighbours: float
):
    """NequIP 0.19.1 (peer) with E2Former's irreps (``channels`` x 0e + 1o + 2e up to ``lmax``, ``parity=False``),
    eager, through its ASE calculator; returns (calculator, model)."""
    from nequip.ase import NequIPCalculator
    from nequip.integrations.utils import basic_transforms
    from nequip.model import NequIPGNNModel
    from nequip.utils.global_state import set_global_state

    set_global_state()
    model = NequIPGNNModel(
        seed=0, model_dtype=dtype, type_names=type_names, r_max=cutoff, num_layers=layers, l_max=lmax,
        parity=False, num_features=channels, avg_num_neighbors=avg_neighbours,
    )  # fmt: skip
    transforms = basic_transforms({}, cutoff, type_names, {name: name for name in type_names})
    return NequIPCalculator(model.eval(), device="cpu", transforms=transforms), model
