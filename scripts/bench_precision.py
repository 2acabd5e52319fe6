"""Float32 force precision of E2Former on periodic boxes of growing size, with and without local frames.

Carbon on an fcc lattice (a = 3.61 Å, rattled by 0.05 Å), cutoff 5 Å (~42 neighbours), one random-weight
E2Former (C 32, lmax 2, 2 layers, the defaults otherwise) built twice with the same weights: local frames
(``frame_size`` default, 2 x cutoff) and one frame per structure (``frame_size=inf``: positions centred,
the behaviour before local frames). Per box:

- total error: max |F32(x32) - F64(x)| / max |F64(x)|, float32 model on float32 positions against float64 on
  the exact positions (what a float32 MD run sees);
- arithmetic error: the same against F64(x32), float64 on the float32-rounded positions: the error of the
  computation alone. The difference is the rounding of the input positions (|x| up to the box size),
  which no float32 code avoids; its size depends on how steep the (untrained, random) model is;
- time of one float32 energy + forces call (median of repeats, 2 threads).

Then the cost of the local frames: full-model time at 4000 atoms and peak memory (fresh process), the
number of frame images against sender images, and one attention layer forward + backward.

    python scripts/bench_precision.py [--sizes 3 6 10 13 20]   # fcc repeats: 108 ... 32000 atoms

Last line: RESULT f32_force_rel_err_4000=<x> f32_error_growth_108_to_<N>=<x> time_ratio_local_frames=<x>
(plus the arithmetic-error keys), N the largest box that fitted in memory.
"""

from __future__ import annotations

import argparse
import copy
import math
import time

import torch
from _bench_utils import median_time, peak_memory

CUTOFF = 5.0


def box(repeat: int):
    from ase.build import bulk

    atoms = bulk("C", "fcc", a=3.61, cubic=True).repeat((repeat, repeat, repeat))
    atoms.rattle(0.05, seed=1)
    return atoms


def make_model(frame_size: float | None, dtype: torch.dtype):
    from sciml.models import E2Former
    from sciml.testing import randomise_output_head

    torch.manual_seed(0)
    model = E2Former([6], cutoff=CUTOFF, channels=32, lmax=2, layers=2, frame_size=frame_size)
    return randomise_output_head(model).to(dtype).eval()


def forces(model, batch) -> torch.Tensor:
    from sciml.nn.forces import ForceStressOutput

    return ForceStressOutput(model)(batch)["forces"].detach().double()


def batches(repeat: int):
    from sciml.testing import graph_batch, with_dtype

    exact = graph_batch([box(repeat)], CUTOFF, torch.float64)
    single = with_dtype(exact, torch.float32)
    return exact, single, with_dtype(single, torch.float64)


def call_case(repeat: int, frame_size: float | None):
    """Builder for peak_memory: one float32 energy + forces call."""
    _, single, _ = batches(repeat)
    model = make_model(frame_size, torch.float32)
    return lambda: forces(model, single)


def available_bytes() -> int:
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def precision_rows(sizes: list[int], repeats: int) -> dict:
    import resource

    rows, per_atom_bytes = {}, None
    header = ("atoms", "box Å", "frames", "total max", "arith max", "arith rms", "f32 ms")
    print("{:>6} {:>6} {:>7} {:>10} {:>10} {:>10} {:>8}".format(*header))
    for repeat in sizes:
        n = 4 * repeat**3
        if per_atom_bytes is not None and per_atom_bytes * n > 0.9 * available_bytes():
            print(f"{n:>6} skipped: needs about {per_atom_bytes * n / 2**30:.1f} GiB")
            continue
        exact, single, rounded = batches(repeat)
        for label, frame_size in (("local", None), ("centred", math.inf)):
            model64 = make_model(frame_size, torch.float64)
            model32 = copy.deepcopy(model64).float()
            f_exact, f_rounded, f_single = forces(model64, exact), forces(model64, rounded), forces(model32, single)
            scale = f_exact.abs().max()
            total = float((f_single - f_exact).abs().max() / scale)
            arith = float((f_single - f_rounded).abs().max() / f_rounded.abs().max())
            rms = float((f_single - f_rounded).pow(2).mean().sqrt() / f_rounded.pow(2).mean().sqrt())
            seconds = median_time(lambda m=model32, b=single: forces(m, b), repeats if n <= 4000 else 1, "cpu")
            rows[(n, label)] = {"total": total, "arith": arith, "rms": rms, "seconds": seconds}
            side = float(exact.cell[0, 0, 0])
            print(f"{n:>6} {side:>6.1f} {label:>7} {total:>10.2e} {arith:>10.2e} {rms:>10.2e} {seconds * 1e3:>8.0f}")
            del model64, model32, f_exact, f_rounded, f_single
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        per_atom_bytes = peak / n  # a generous bound for the next size
    return rows


def frame_images(repeat: int) -> tuple[int, int]:
    from sciml.models.e2former.context import GraphContext

    exact, _, _ = batches(repeat)
    counts = []
    for frame_size in (2 * CUTOFF, math.inf):
        context = GraphContext.build(
            exact.pos, torch.zeros_like(exact.numbers), exact.batch, 1, exact.edge_index, exact.shifts, 1, frame_size
        )
        counts.append(context.image_positions.shape[0])
    return counts[0], counts[1]


def layer_seconds(repeat: int, frame_size: float, repeats: int) -> float:
    from sciml.models.e2former.attention import Wigner6jAttention
    from sciml.models.e2former.context import GraphContext

    torch.manual_seed(0)
    _, single, _ = batches(repeat)
    context = GraphContext.build(
        single.pos, torch.zeros_like(single.numbers), single.batch, 1, single.edge_index, single.shifts, 1, frame_size
    )
    layer = Wigner6jAttention(2, 32, heads=4, order=1, edge_features=96)
    h = torch.randn(single.pos.shape[0], 9, 32, requires_grad=True)
    edge_features = torch.randn(context.distances.shape[0], 96)
    envelope = torch.rand(context.distances.shape[0])

    def run():
        layer(h, edge_features, envelope, context).square().sum().backward()

    return median_time(run, repeats, "cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 6, 10, 13, 20], help="fcc cubic repeats")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(2)
    rows = precision_rows(args.sizes, args.repeats)

    measured = sorted({n for n, _ in rows})
    n_cost = 4000 if 4000 in measured else measured[-1]
    repeat = round((n_cost / 4) ** (1 / 3))
    print(f"\ncost of local frames at {n_cost} atoms (float32, energy + forces; layer: forward + backward):")
    local, centred = rows[(n_cost, "local")]["seconds"], rows[(n_cost, "centred")]["seconds"]
    images_local, images_centred = frame_images(repeat)
    variants = (("local", None), ("centred", math.inf))
    memory = {label: peak_memory(call_case, (repeat, fs), "cpu") for label, fs in variants}
    layer = {label: layer_seconds(repeat, 2 * CUTOFF if fs is None else fs, args.repeats) for label, fs in variants}
    print(f"  full model: {local * 1e3:.0f} ms local vs {centred * 1e3:.0f} ms centred (ratio {local / centred:.3f})")
    print(f"  peak memory: {memory['local'] / 2**20:.0f} MiB vs {memory['centred'] / 2**20:.0f} MiB")
    print(f"  sender images: {images_local} frame images vs {images_centred} images")
    print(f"  attention layer: {layer['local'] * 1e3:.1f} ms vs {layer['centred'] * 1e3:.1f} ms")

    largest, first = measured[-1], rows[(measured[0], "local")]
    result = {
        f"f32_force_rel_err_{n_cost}": rows[(n_cost, "local")]["total"],
        f"f32_error_growth_{measured[0]}_to_{largest}": rows[(largest, "local")]["total"] / first["total"],
        "time_ratio_local_frames": local / centred,
        f"f32_arith_rms_{n_cost}": rows[(n_cost, "local")]["rms"],
        f"f32_arith_rms_growth_{measured[0]}_to_{largest}": rows[(largest, "local")]["rms"] / first["rms"],
        f"f32_arith_rms_growth_{measured[0]}_to_{largest}_centred": rows[(largest, "centred")]["rms"]
        / rows[(measured[0], "centred")]["rms"],
    }
    print("RESULT " + " ".join(f"{key}={value:.4g}" for key, value in result.items()))


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"# {time.perf_counter() - start:.0f} s")
