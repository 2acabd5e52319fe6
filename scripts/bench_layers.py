"""Kernel-matched layer scaling (the E2Former paper's Figure 1b, with the kernels held equal).

One convolution sum_j alpha_ij ⊙ W [h_j ⊗ P^L(r_ij)], forward + backward (to the features, the attention
weights and the geometry: edge vectors and solid harmonics, what a force computation needs), three ways:
- ``factorised``: E2Former's Wigner-6j form (tensor products per frame image and per receiver, per edge only
  the compiled aggregation kernel);
- ``matched``: the same message with one tensor product per edge, in the same compiled kernels (sciml's
  ``cg_contract`` per edge, summed by the same ``edge_aggregate`` kernel): the algorithm alone differs;
- ``e3nn``: e3nn's per-edge "uvu" tensor product with ``index_add`` (what NequIP-like layers do).
Random atoms at the number density of copper in a periodic cube, the cutoff set for K neighbours; float32,
C channels, the graph context built once outside the timed call; median of repeats.

    python scripts/bench_layers.py [--lmax 1 2 3 4] [--orders 1 2] [--neighbours 16 64 128]
                                   [--sizes 256 1024] [--channels 64] [--plot docs/layer_scaling.png]

Last line: RESULT layer_speedup_lmax3_k64_matched=<x> layer_speedup_lmax3_k64_e3nn=<x>
(per-edge time / factorised time at lmax 3, order 1, K 64, the largest size).
"""

from __future__ import annotations

import argparse
import math

import torch
from _bench_utils import median_time
from _results import add_result_arguments, recorded
from bench_e2former import periodic_system

METHODS = ("factorised", "matched", "e3nn")
MEMORY_LIMIT = 6 * 2**30  # bytes of per-edge tensors above which a case is skipped on this machine


def per_edge_bytes(lmax: int, order: int, channels: int, edges: int) -> int:
    """About the largest per-edge tensors of the per-edge methods (messages and their gradients), float32."""
    from sciml.equivariant.tensor_product import coupling_table

    degrees = tuple(range(lmax + 1))
    table, _ = coupling_table(degrees, order, degrees, True)
    return 4 * edges * channels * (table.out_dim + (lmax + 1) ** 2) * 3


def layer_case(method: str, lmax: int, order: int, neighbours: int, n: int, channels: int):
    """A closure running one forward + backward of the chosen convolution on a fresh random system."""
    from sciml.equivariant.tensor_product import Coupling
    from sciml.models.baselines.edge_convolution import EdgeTensorProductConvolution
    from sciml.models.e2former.context import GraphContext
    from sciml.models.e2former.convolution import Wigner6jConvolution

    torch.manual_seed(0)
    batch, _ = periodic_system(n, neighbours)
    context = GraphContext.build(
        batch.pos, torch.zeros_like(batch.numbers), batch.batch, 1, batch.edge_index, batch.shifts, max_order=order
    )
    geometry = [context.vectors, *context.image_powers, *context.receiver_powers]
    for tensor in geometry:
        tensor.requires_grad_()
    degrees = tuple(range(lmax + 1))
    coupling = Coupling(degrees, order, degrees, channels, channels)
    if method == "e3nn":
        layer = EdgeTensorProductConvolution(coupling)
    else:
        layer = Wigner6jConvolution(coupling, dense=method == "matched")
    layer = layer.float()  # e3nn builds its module in float64
    values = torch.randn(context.image_atom.shape[0], (lmax + 1) ** 2, channels, requires_grad=True)
    alpha = torch.rand(context.distances.shape[0], channels, requires_grad=True)
    inputs = [values, alpha, *geometry]

    def run():
        out = layer(values, alpha, context)
        torch.autograd.grad(out.square().sum(), inputs, allow_unused=True)

    return run, context.distances.shape[0]


def plot(rows: dict, path: str, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(args.sizes)
    figure, axes = plt.subplots(len(args.orders), 2, figsize=(9, 3.4 * len(args.orders)), squeeze=False)
    for i, order in enumerate(args.orders):
        for k in args.neighbours:
            times = [rows.get((lmax, order, k, n)) for lmax in args.lmax]
            for j, method in enumerate(("matched", "e3nn")):
                speedups = [t[method] / t["factorised"] if t and t.get(method) else math.nan for t in times]
                axes[i, j].plot(args.lmax, speedups, marker="o", label=f"K = {k}")
        for j, method in enumerate(("matched", "e3nn")):
            axes[i, j].axhline(1.0, color="grey", lw=0.8)
            axes[i, j].set(xlabel="lmax", ylabel=f"{method} time / factorised time", xticks=args.lmax)
            axes[i, j].set_title(f"order {order}, vs {'per-edge, same kernels' if j == 0 else 'e3nn per edge'}")
            axes[i, j].legend()
    figure.suptitle(f"Wigner-6j layer speedup, fwd + bwd, N = {n}, C = {args.channels}, float32, 2 CPU cores")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lmax", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--orders", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--neighbours", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plot", help="write the speedup plot (PNG) here")
    add_result_arguments(parser)
    args = parser.parse_args()
    if args.smoke:
        args.lmax, args.orders, args.neighbours, args.sizes, args.repeats = [1], [1], [16], [64], 1
    with recorded("layers", "The Wigner-6j layer against per-edge products (same kernels, and e3nn)", args.results):
        benchmark(args)


def benchmark(args) -> None:
    from sciml.equivariant.kernels import load

    load(with_cuda=False)
    print(f"threads={torch.get_num_threads()} C={args.channels} float32, convolution fwd + bwd, ms (speedup)")
    print("| lmax | order | K | atoms | edges | factorised ms | matched ms | e3nn ms | vs matched | vs e3nn |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = {}
    for order in args.orders:
        for lmax in args.lmax:
            for k in args.neighbours:
                for n in args.sizes:
                    times, edges = {}, None
                    for method in METHODS:
                        run, edges = layer_case(method, lmax, order, k, n, args.channels)
                        if method != "factorised" and per_edge_bytes(lmax, order, args.channels, edges) > MEMORY_LIMIT:
                            times[method] = math.nan  # too large for this machine's memory
                            continue
                        times[method] = median_time(run, args.repeats, "cpu")
                        del run
                    rows[lmax, order, k, n] = times
                    f, m, e = (times[method] * 1e3 for method in METHODS)
                    print(f"| {lmax} | {order} | {k} | {n} | {edges} | {f:.1f} | {m:.1f} | {e:.1f} | {m / f:.2f} "
                          f"| {e / f:.2f} |", flush=True)  # fmt: skip
    if args.plot:
        plot(rows, args.plot, args)
    key = (3, 1, 64, max(args.sizes))
    ratio = {m: rows[key][m] / rows[key]["factorised"] if key in rows else math.nan for m in ("matched", "e3nn")}
    print(
        f"RESULT layer_speedup_lmax3_k64_matched={ratio['matched']:.3f} "
        f"layer_speedup_lmax3_k64_e3nn={ratio['e3nn']:.3f}"
    )


if __name__ == "__main__":
    main()
