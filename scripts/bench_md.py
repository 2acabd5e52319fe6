"""MD steps per second with SciMLCalculator on periodic fcc Cu: E2Former vs the same model with the
per-edge e3nn convolution (same width, same parameters), in the same process.

    python scripts/bench_md.py [--sizes 64 512 2048] [--channels 32] [--dtype float32]

NVE velocity Verlet, 1 fs steps, 300 K initial velocities, untrained weights with a random output head (the
speed does not depend on training). Last line: RESULT md_speedup_512=<x> md_speedup_2048=<x>.
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np
import torch
from ase import units
from ase.build import bulk
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
from ase.md.verlet import VelocityVerlet

from sciml.calculators import SciMLCalculator
from sciml.models import E2Former
from sciml.models.baselines import use_edge_convolutions
from sciml.testing import randomise_output_head

REPEATS = {64: (2, 2, 4), 512: (4, 4, 8), 2048: (8, 8, 8)}


def steps_per_second(model, n_atoms: int, dtype: str, steps: int) -> float:
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(REPEATS[n_atoms])
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(0))
    atoms.calc = SciMLCalculator(model, dtype=dtype, skin=0.5)
    dynamics = VelocityVerlet(atoms, 1.0 * units.fs)
    dynamics.run(2)  # warm-up: kernels, first neighbour list
    start = time.perf_counter()
    dynamics.run(steps)
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 512, 2048], choices=sorted(REPEATS))
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--cutoff", type=float, default=4.5)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = parser.parse_args()
    torch.manual_seed(0)
    e2former = randomise_output_head(
        E2Former([29], cutoff=args.cutoff, channels=args.channels, layers=args.layers, heads=4, avg_neighbours=40.0)
    ).eval()
    baseline = use_edge_convolutions(copy.deepcopy(e2former)).eval()
    print(
        f"Cu fcc, cutoff {args.cutoff} Å (~42 neighbours), C={args.channels}, {args.layers} layers, {args.dtype}, "
        f"threads={torch.get_num_threads()}"
    )
    print(f"{'atoms':>6} {'E2Former steps/s':>17} {'baseline steps/s':>17} {'speedup':>8}")
    speedups = {}
    for n in args.sizes:
        steps = max(3, 640 // n)
        fast = steps_per_second(e2former, n, args.dtype, steps)
        slow = steps_per_second(baseline, n, args.dtype, steps)
        speedups[n] = fast / slow
        print(f"{n:>6} {fast:>17.2f} {slow:>17.2f} {speedups[n]:>8.2f}", flush=True)
    print(
        f"RESULT md_speedup_512={speedups.get(512, float('nan')):.2f} "
        f"md_speedup_2048={speedups.get(2048, float('nan')):.2f}"
    )


if __name__ == "__main__":
    main()
