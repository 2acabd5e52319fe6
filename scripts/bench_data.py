"""Out-of-core training data: one epoch over 1,000,000 frames of 20 atoms from a prepared HDF5 frame store,
with peak memory bounded, against the in-memory data module (the baseline) on the same frames.

Synthetic data with exact labels: a 20-atom molecule (C6 H8 N2 O4 on a fixed geometry) in trajectories of
1000 frames; each frame displaces every atom by N(0, 0.05 Å) and carries the energy and forces of an
Einstein (harmonic) model, E = sum_i k |d_i|^2 / 2 + sum_i e_Z(i), F = -k d (k = 4 eV/Å^2), so F = -dE/dx.
Each stage runs in a fresh process that reports its own peak resident memory (VmHWM, DataLoader workers
included):

1. prepare: ``write_frame_store`` (what ``sciml data prepare`` runs) streams the generated frames into the
   store, whole trajectories dealt 98 / 1 / 1 % (seed 0); frames/s and file size;
2. loader: the training dataloader alone (read, neighbour list at 5 Å, collate), no model: frames/s;
3. train: one epoch of a small E2Former (C 8, lmax 1, 1 layer, 2 heads; batch 32; Adam; float32; 2 threads)
   through Lightning on the store, then its validation; training frames/s (validation time excluded) and
   the share of the training time spent waiting for data (between one step's end and the next one's start,
   data read in the training process: ``--workers 0``);
4. baseline: the in-memory ``AtomsDataModule`` on an extxyz of ``--memory-frames`` of the same frames (read,
   validated, one pass of its dataloader): peak memory, and that peak extrapolated linearly to the store's
   frame count.

    python scripts/bench_data.py [--frames 1000000] [--memory-frames 50000] [--workdir runs/bench_data]
    python scripts/bench_data.py --smoke --workdir /tmp/data --results /tmp/data   # 2000 frames, seconds

Results with provenance: ``benchmarks/results/data.{json,md}``.

Last line: RESULT frames=<n> train_peak_rss_gib=<x> train_frames_per_s=<x> (the training epoch), plus
data_wait_share, loader_frames_per_s, prepare_frames_per_s, store_gib and memory_baseline_rss_gib_extrapolated
(the in-memory module's peak extrapolated to ``frames``). Targets at 1,000,000 frames: train_peak_rss_gib <= 2,
data_wait_share small (the data layer is not the bottleneck).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _results import add_result_arguments, recorded

NUMBERS = np.array([6] * 6 + [1] * 8 + [7] * 2 + [8] * 4)
SPRING, AMPLITUDE = 4.0, 0.05
ELEMENT_ENERGY = {1: -13.6, 6: -1029.0, 7: -1485.0, 8: -2041.0}


def geometry() -> np.ndarray:
    """A fixed, compact 20-atom geometry (Å): points of a 3 x 3 x 3 grid of spacing 1.4 Å, seeded choice."""
    grid = np.stack(np.meshgrid(*[np.arange(3)] * 3, indexing="ij"), -1).reshape(-1, 3) * 1.4
    return grid[np.random.default_rng(0).choice(len(grid), len(NUMBERS), replace=False)]


def trajectories(frames: int, trajectory_frames: int = 1000):
    """``(source, frames)`` pairs of ASE Atoms with Einstein-model labels (module docstring)."""
    from ase import Atoms
    from ase.calculators.singlepoint import SinglePointCalculator

    base, offset = geometry(), sum(ELEMENT_ENERGY[int(z)] for z in NUMBERS)
    for k in range(0, frames, trajectory_frames):
        rng = np.random.default_rng(k)
        count = min(trajectory_frames, frames - k)
        displacements = rng.normal(scale=AMPLITUDE, size=(count, len(NUMBERS), 3))

        def frames_of(displacements=displacements):
            for d in displacements:
                atoms = Atoms(numbers=NUMBERS, positions=base + d)
                energy = 0.5 * SPRING * float(np.sum(d**2)) + offset
                atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=-SPRING * d)
                yield atoms

        yield f"synthetic/trajectory{k // trajectory_frames}", frames_of()


def peak_rss_gib() -> float:
    """Peak resident memory of this process (VmHWM) plus that of its finished children, GiB."""
    import resource

    with open("/proc/self/status") as handle:
        own = next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:")) * 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return (own + children) / 2**30


def stage_prepare(args) -> dict:
    from sciml.data.prepare import write_frame_store

    start = time.perf_counter()
    frames = {"all": trajectories(args.frames, args.trajectory_frames)}
    summary = write_frame_store(args.store, frames, split=(0.98, 0.01, 0.01), split_mode="trajectory", overwrite=True)
    seconds = time.perf_counter() - start
    return {"frames": sum(summary["frames"].values()), "seconds": seconds,
            "frames_per_s": args.frames / seconds, "store_gib": Path(args.store).stat().st_size / 2**30}  # fmt: skip


def data_module(args):
    from sciml.data import AtomsDataModule

    return AtomsDataModule(prepared=args.store, cutoff=5.0, batch_size=args.batch_size, num_workers=args.workers)


def stage_loader(args) -> dict:
    loader, frames, start = data_module(args).train_dataloader(), 0, time.perf_counter()
    for batch in loader:
        frames += batch.num_graphs
        if frames >= args.loader_frames:
            break
    return {"frames": frames, "frames_per_s": frames / (time.perf_counter() - start)}


def stage_train(args) -> dict:
    import lightning as L
    import torch

    from sciml.models import E2Former
    from sciml.training import PotentialModule

    torch.set_num_threads(2)
    data = data_module(args)
    model = E2Former(data.species, data.cutoff, channels=8, lmax=1, layers=1, heads=2,
                     energy_reference=data.energy_reference, energy_scale=data.force_rms)  # fmt: skip
    timer = EpochTimer()
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[timer],
                        default_root_dir=str(Path(args.store).parent))  # fmt: skip
    trainer.fit(PotentialModule(model, relevel_frames=0), datamodule=data)
    return {"frames": timer.frames, "seconds": timer.seconds, "frames_per_s": timer.frames / timer.seconds,
            "data_wait_share": timer.waiting / timer.seconds, "steps": trainer.global_step,
            "validation_seconds": timer.validating}  # fmt: skip


class EpochTimer:
    """Lightning callback: training-epoch time, frames, and time spent between steps (waiting for data)."""

    def __new__(cls):
        import lightning as L

        class _Timer(L.Callback):
            frames, waiting, seconds, validating, _last = 0, 0.0, 0.0, 0.0, None

            def on_train_epoch_start(self, trainer, module):
                self._start = self._last = time.perf_counter()

            def on_validation_epoch_start(self, trainer, module):
                self._validation_start = time.perf_counter()

            def on_validation_epoch_end(self, trainer, module):
                self.validating += time.perf_counter() - self._validation_start

            def on_train_batch_start(self, trainer, module, batch, index):
                self.waiting += time.perf_counter() - self._last

            def on_train_batch_end(self, trainer, module, outputs, batch, index):
                self.frames += batch.num_graphs
                self._last = time.perf_counter()

            def on_train_epoch_end(self, trainer, module):  # validation (at the epoch's end) not counted
                self.seconds = time.perf_counter() - self._start - self.validating

        return _Timer()


def stage_memory(args) -> dict:
    import ase.io

    from sciml.data import AtomsDataModule

    path = Path(args.store).with_name(f"memory_{args.memory_frames}.extxyz")
    if not path.exists():
        generated = trajectories(args.memory_frames, args.trajectory_frames)
        ase.io.write(path, [atoms for _, frames in generated for atoms in frames])
    before = peak_rss_gib()
    data = AtomsDataModule(paths=str(path), cutoff=5.0, batch_size=args.batch_size, split=(0.98, 0.01, 0.01))
    frames = sum(batch.num_graphs for batch in data.train_dataloader())
    return {"frames": frames, "rss_gib": peak_rss_gib(), "rss_gib_before": before}


STAGES = {"prepare": stage_prepare, "loader": stage_loader, "train": stage_train, "memory": stage_memory}


def run_stage(name: str, args) -> dict:
    command = [sys.executable, __file__, "--stage", name, *sys.argv[1:]]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"stage {name} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--memory-frames", type=int, default=50_000)
    parser.add_argument("--loader-frames", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--trajectory-frames", type=int, default=1000, help="frames per synthetic trajectory")
    parser.add_argument("--workdir", default="runs/bench_data")
    parser.add_argument("--stage", choices=list(STAGES), help=argparse.SUPPRESS)
    add_result_arguments(parser)
    args = parser.parse_args()
    if args.smoke:
        args.frames, args.memory_frames, args.loader_frames, args.trajectory_frames = 2000, 1000, 300, 20
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    args.store = str(Path(args.workdir) / f"synthetic_{args.frames}.h5")
    if args.stage:
        os.environ.setdefault("OMP_NUM_THREADS", "2")
        result = STAGES[args.stage](args)
        print(json.dumps({**result, "peak_rss_gib": peak_rss_gib()}))
        return
    with recorded("data", f"Out-of-core training data: {args.frames} frames from a frame store", args.results):
        benchmark(args)


def benchmark(args) -> None:
    results = {name: run_stage(name, args) for name in STAGES}
    memory = results["memory"]
    per_frame = (memory["peak_rss_gib"] - memory["rss_gib_before"]) / memory["frames"] * 0.98
    extrapolated = memory["rss_gib_before"] + per_frame * args.frames
    print(f"stages, each in a fresh process ({args.frames} frames of 20 atoms, batch {args.batch_size}):")
    print("| stage | frames | frames/s | peak RSS GiB | notes |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, r in results.items():
        notes = {
            "prepare": f"store {r.get('store_gib', 0):.2f} GiB, {r.get('seconds', 0):.0f} s",
            "train": f"{r.get('steps', 0)} steps, waiting for data {100 * r.get('data_wait_share', 0):.1f} %",
            "memory": f"in memory; {extrapolated:.1f} GiB extrapolated to {args.frames} frames",
        }.get(name, "")
        rate = r.get("frames_per_s", float("nan"))
        print(f"| {name} | {r['frames']} | {rate:.0f} | {r['peak_rss_gib']:.2f} | {notes} |")
    train, prepare = results["train"], results["prepare"]
    print(
        f"RESULT frames={args.frames} train_peak_rss_gib={train['peak_rss_gib']:.3f} "
        f"train_frames_per_s={train['frames_per_s']:.0f} "
        f"data_wait_share={train['data_wait_share']:.3f} loader_frames_per_s={results['loader']['frames_per_s']:.0f} "
        f"prepare_frames_per_s={prepare['frames_per_s']:.0f} store_gib={prepare['store_gib']:.3f} "
        f"memory_baseline_rss_gib_extrapolated={extrapolated:.2f}"
    )


if __name__ == "__main__":
    main()
