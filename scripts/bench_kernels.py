"""Benchmark the compiled kernels against the pure-PyTorch reference and per-edge e3nn products.

Edge aggregation out[i] = sum_j alpha_ij * x_j and the weighted node tensor product (x ⊗ P^1 with per-path
channel mixing), C = 128, lmax = 2, E = 32 N, float32, forward + backward. Time is the median of
repeats in this process; peak memory per case in a fresh process (see _bench_utils.py).

    python scripts/bench_kernels.py [--sizes 256 1024 4096] [--repeats 5] [--device cpu|cuda]
    python scripts/bench_kernels.py --smoke --results /tmp/kernels      # seconds: N = 64, one repeat

Results with provenance: ``benchmarks/results/kernels.{json,md}`` (``--results`` elsewhere).

Last line: RESULT agg_speedup_4096=<x> agg_mem_ratio_4096=<x> tp_speedup_4096=<x> (reference / kernel).
"""

from __future__ import annotations

import argparse

import torch
from _bench_utils import median_time, peak_memory
from _results import add_result_arguments, recorded

CHANNELS, DEGREES, NEIGHBOURS = 128, (0, 1, 2), 32


def make_case(op: str, method: str, n: int, device: str):
    """Inputs and a fwd+bwd closure for one (operation, method, size)."""
    from e3nn import o3

    from sciml.equivariant.graph import EdgeGraph
    from sciml.equivariant.operations import WeightedTensorProduct, edge_aggregate
    from sciml.equivariant.tensor_product import Coupling
    from sciml.models.baselines.edge_convolution import to_e3nn

    generator = torch.Generator().manual_seed(0)
    e = NEIGHBOURS * n
    receivers = torch.randint(0, n, (e,), generator=generator).to(device)
    senders = torch.randint(0, n, (e,), generator=generator).to(device)
    x = torch.randn(n, 9, CHANNELS, generator=generator).to(device).requires_grad_()
    irreps = o3.Irreps(f"{CHANNELS}x0e+{CHANNELS}x1e+{CHANNELS}x2e")
    if op == "agg":
        graph, _ = EdgeGraph.from_edges(receivers, senders, n, n)
        alpha = torch.randn(e, CHANNELS, generator=generator).to(device).requires_grad_()
        if method == "e3nn":
            product = o3.ElementwiseTensorProduct(irreps, o3.Irreps(f"{CHANNELS}x0e+{CHANNELS}x0e+{CHANNELS}x0e")).to(
                device
            )
            flat_x = to_e3nn(x, DEGREES)

            def run():
                per_edge = product(flat_x[graph.col], alpha.repeat(1, 3))  # (E, 9C): one TP per edge
                out = torch.zeros(n, per_edge.shape[1], device=device).index_add(0, graph.row, per_edge)
                out.sum().backward()

            return run
        backend = "reference" if method == "reference" else device

        def run():
            edge_aggregate(alpha, x, graph, backend).sum().backward()

        return run
    position = torch.randn(n, 3, generator=generator).to(device)
    if method == "e3nn":  # the same weighted product evaluated per edge, as a conventional layer does
        product = o3.FullyConnectedTensorProduct(irreps, o3.Irreps("1x1e"), irreps).to(device)
        flat_x = to_e3nn(x, DEGREES)
        edge_vectors = position[senders] - position[receivers]

        def run():
            product(flat_x[senders], edge_vectors).sum().backward()

        return run
    module = WeightedTensorProduct(Coupling(DEGREES, 1, DEGREES, CHANNELS, CHANNELS, parity=False), backend=method).to(
        device
    )

    def run():
        module(x, position).sum().backward()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--e3nn-max", type=int, default=1024, help="largest N for the per-edge e3nn rows")
    add_result_arguments(parser)
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.repeats, args.e3nn_max = [64], 1, 64
    title = f"Compiled kernels against the PyTorch reference and per-edge e3nn ({args.device})"
    with recorded("kernels" if args.device == "cpu" else f"kernels_{args.device}", title, args.results):
        benchmark(args)


def benchmark(args) -> None:
    from sciml.equivariant.kernels import load

    load(with_cuda=args.device == "cuda")
    kernel = args.device
    print(f"device {args.device}, {torch.get_num_threads()} threads, C = {CHANNELS}, lmax 2, E = 32 N, float32, "
          "forward + backward:")  # fmt: skip
    print("| op | N | method | time ms | peak MiB | reference / method |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    results: dict[tuple[str, str, int], tuple[float, int]] = {}
    for op in ("agg", "tp"):
        for n in args.sizes:
            methods = ["reference", kernel] + (["e3nn"] if n <= args.e3nn_max else [])
            for method in methods:
                seconds = median_time(make_case(op, method, n, args.device), args.repeats, args.device)
                memory = peak_memory(make_case, (op, method, n, args.device), args.device)
                results[op, method, n] = (seconds, memory)
                ratio = results[op, "reference", n][0] / seconds
                print(
                    f"| {op} | {n} | {method} | {seconds * 1e3:.2f} | {memory / 2**20:.1f} | {ratio:.2f} |", flush=True
                )
    big = max(args.sizes)
    agg_speedup = results["agg", "reference", big][0] / results["agg", kernel, big][0]
    agg_memory = results["agg", "reference", big][1] / max(results["agg", kernel, big][1], 1)
    tp_speedup = results["tp", "reference", big][0] / results["tp", kernel, big][0]
    print(
        f"RESULT agg_speedup_{big}={agg_speedup:.2f} agg_mem_ratio_{big}={agg_memory:.2f} "
        f"tp_speedup_{big}={tp_speedup:.2f}"
    )


if __name__ == "__main__":
    main()
