"""Float32 force precision of E2Former on periodic boxes of growing size, with and without local frames.

fcc Cu boxes (``_systems.py``: a = 3.61 Å, rattled by 0.05 Å), cutoff 5 Å (~42 neighbours), one random-weight
E2Former (the ``small`` preset: C 32, 2 layers, the defaults otherwise) built three times with the same weights: the
default local frames (``frame_size`` = 2 x cutoff), frames of 4 x cutoff (boxes under 40 Å keep one frame),
and one centred frame per structure (``frame_size=inf``, the behaviour before local frames). Per box:

- total error: max |F32(x32) - F64(x)| / max |F64(x)|, float32 model on float32 positions against float64 on
  the exact positions (what a float32 MD run sees);
- arithmetic error: the same (max, and RMS over all components) against F64(x32), float64 on the
  float32-rounded positions: the error of the computation alone. The difference is the rounding of the
  input positions (|x| up to the box size), which no float32 code avoids; its effect depends on how steep
  the (untrained, random) model is.

Then the cost at 4000 atoms: full-model float32 energy + forces (the variants timed round-robin), peak
memory (fresh process), sender images, and one attention layer forward + backward.

    python scripts/bench_precision.py [--sizes 3 6 10 13 20]   # fcc repeats: 108 ... 32000 atoms
    python scripts/bench_precision.py --smoke --results /tmp/precision     # 4 and 32 atoms, seconds

Results with provenance: ``benchmarks/results/precision.{json,md}``.

Last line: RESULT f32_force_rel_err_4000=<x> f32_error_growth_108_to_<N>=<x> time_ratio_local_frames=<x>
(plus the arithmetic-error keys), N the largest box that fitted in memory (boxes are skipped when the
float64 reference would not fit).
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time

import torch
from _bench_utils import median_time, peak_memory
from _results import add_result_arguments, recorded
from _systems import cu_crystal, e2former

CUTOFF = 5.0
# label -> frame_size: the default (2 x cutoff), frames of 4 x cutoff, and one centred frame per structure
VARIANTS = {"default": None, "4xcut": 4 * CUTOFF, "centred": math.inf}


def box(repeat: int):
    return cu_crystal(4 * repeat**3)


def make_model(frame_size: float | None, dtype: torch.dtype):
    return e2former("small", species=[29], cutoff=CUTOFF, frame_size=frame_size).to(dtype)


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


def precision_rows(sizes: list[int]) -> dict:
    import resource

    rows, per_atom_bytes = {}, None
    header = ("atoms", "box Å", "frames", "total max", "arith max", "arith rms")
    print("{:>6} {:>6} {:>7} {:>10} {:>10} {:>10}".format(*header))
    for repeat in sizes:
        n = 4 * repeat**3
        if per_atom_bytes is not None and per_atom_bytes * n > 0.9 * available_bytes():
            print(f"{n:>6} skipped: needs about {per_atom_bytes * n / 2**30:.1f} GiB")
            continue
        exact, single, rounded = batches(repeat)
        for label, frame_size in VARIANTS.items():
            model64 = make_model(frame_size, torch.float64)
            model32 = copy.deepcopy(model64).float()
            f_exact, f_rounded, f_single = forces(model64, exact), forces(model64, rounded), forces(model32, single)
            scale = f_exact.abs().max()
            total = float((f_single - f_exact).abs().max() / scale)
            arith = float((f_single - f_rounded).abs().max() / f_rounded.abs().max())
            rms = float((f_single - f_rounded).pow(2).mean().sqrt() / f_rounded.pow(2).mean().sqrt())
            rows[(n, label)] = {"total": total, "arith": arith, "rms": rms}
            side = float(exact.cell[0, 0, 0])
            print(f"{n:>6} {side:>6.1f} {label:>7} {total:>10.2e} {arith:>10.2e} {rms:>10.2e}")
            del model64, model32, f_exact, f_rounded, f_single
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        per_atom_bytes = peak / n  # a generous bound for the next size
    return rows


def frame_images(repeat: int, frame_size: float) -> int:
    from sciml.models.e2former.context import GraphContext

    exact, _, _ = batches(repeat)
    context = GraphContext.build(
        exact.pos, torch.zeros_like(exact.numbers), exact.batch, 1, exact.edge_index, exact.shifts, 1, frame_size
    )
    return context.image_positions.shape[0]


def interleaved_seconds(repeat: int, repeats: int) -> dict[str, float]:
    """Median float32 energy + forces time of each variant, the variants timed in turn (round-robin), so
    that slow phases of the machine hit all of them alike."""
    _, single, _ = batches(repeat)
    models = {label: make_model(frame_size, torch.float32) for label, frame_size in VARIANTS.items()}
    times: dict[str, list[float]] = {label: [] for label in models}
    for model in models.values():
        forces(model, single)  # warm-up
    for _ in range(repeats):
        for label, model in models.items():
            start = time.perf_counter()
            forces(model, single)
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(values) for label, values in times.items()}


def layer_seconds(repeat: int, frame_size: float, repeats: int) -> float:
    from sciml.models.e2former.attention import Wigner6jAttention
    from sciml.models.e2former.context import GraphContext
    from sciml.models.e2former.settings import BlockSettings, EdgeSettings

    torch.manual_seed(0)
    _, single, _ = batches(repeat)
    context = GraphContext.build(
        single.pos, torch.zeros_like(single.numbers), single.batch, 1, single.edge_index, single.shifts, 1, frame_size
    )
    layer = Wigner6jAttention(BlockSettings(2, 32, heads=4, order=1, edges=EdgeSettings(96, 32)))
    h = torch.randn(single.pos.shape[0], 9, 32, requires_grad=True)
    edge_features = torch.randn(context.distances.shape[0], 96)
    envelope = torch.rand(context.distances.shape[0])

    def run():
        layer(h, edge_features, envelope, context).square().sum().backward()

    return median_time(run, repeats, "cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 6, 10, 13, 20], help="fcc cubic repeats")
    parser.add_argument("--repeats", type=int, default=7)
    add_result_arguments(parser)
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.repeats = [1, 2], 1
    with recorded("precision", "Float32 force precision on growing boxes, with and without local frames", args.results):
        benchmark(args)


def benchmark(args) -> None:
    torch.set_num_threads(2)
    rows = precision_rows(args.sizes)

    measured = sorted({n for n, _ in rows})
    n_cost = 4000 if 4000 in measured else measured[-1]
    repeat = round((n_cost / 4) ** (1 / 3))
    print(f"\ncost at {n_cost} atoms (float32; full model energy + forces, round-robin medians; layer fwd + bwd):")
    seconds = interleaved_seconds(repeat, args.repeats)
    print("| frames | frame_size Å | sender images | full model ms | ratio | peak MiB | attention layer ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, frame_size in VARIANTS.items():
        size = 2 * CUTOFF if frame_size is None else frame_size
        memory = peak_memory(call_case, (repeat, frame_size), "cpu") / 2**20
        layer = layer_seconds(repeat, size, args.repeats) * 1e3
        ratio = seconds[label] / seconds["centred"]
        print(
            f"| {label} | {size:g} | {frame_images(repeat, size)} | {seconds[label] * 1e3:.0f} | {ratio:.3f} "
            f"| {memory:.0f} | {layer:.1f} |"
        )

    largest, first = measured[-1], measured[0]

    def growth(label: str, key: str) -> float:
        return rows[(largest, label)][key] / rows[(first, label)][key]

    result = {
        f"f32_force_rel_err_{n_cost}": rows[(n_cost, "default")]["total"],
        f"f32_error_growth_{first}_to_{largest}": growth("default", "total"),
        "time_ratio_local_frames": seconds["default"] / seconds["centred"],
        f"f32_arith_rms_{n_cost}": rows[(n_cost, "default")]["rms"],
        f"f32_arith_rms_growth_{first}_to_{largest}": growth("default", "rms"),
        f"f32_arith_rms_growth_{first}_to_{largest}_4xcut": growth("4xcut", "rms"),
        f"f32_arith_rms_growth_{first}_to_{largest}_centred": growth("centred", "rms"),
        "time_ratio_frames_4xcut": seconds["4xcut"] / seconds["centred"],
    }
    print("RESULT " + " ".join(f"{key}={value:.4g}" for key, value in result.items()))


if __name__ == "__main__":
    main()
