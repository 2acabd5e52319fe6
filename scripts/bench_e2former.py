"""E2Former attention layer vs the same layer with a conventional per-edge e3nn tensor product, and
full-model energy + forces time per atom vs system size.

Dense periodic systems: random atoms in a cube at the number density of copper (0.085 Å^-3), cutoff chosen
for the requested mean neighbours per atom. Layer timings are forward + backward (median of repeats), with
the graph context built once outside; peak memory per case in a fresh process. Both layers share the
attention and the channel mixing; only the message computation differs.

    python scripts/bench_e2former.py [--channels 64 128] [--neighbours 8 16 32 64] [--sizes 256 1024 2048]

Results with provenance: ``benchmarks/results/attention_layer.{json,md}``; ``--smoke``: tiny sizes, seconds.

Last line: RESULT layer_speedup_k32_n1024_c128=<x> layer_speedup_k64_n1024_c128=<x>
layer_memory_ratio_k32_n1024_c128=<x> model_time_loglog_slope_vs_atoms=<x> (baseline / E2Former with k
neighbours, n atoms, c channels; slope of log time vs log N of the full model, 1.0 = linear).
"""

from __future__ import annotations

import argparse
import copy

import numpy as np
import torch
from _bench_utils import median_time, peak_memory
from _results import add_result_arguments, recorded
from _systems import liquid_box


def periodic_system(n: int, neighbours: int, seed: int = 0, dtype=torch.float32):
    """A graph batch of n random atoms in a periodic cube with about ``neighbours`` per atom
    (``_systems.liquid_box``), and its cutoff."""
    from torch_geometric.data import Batch

    from sciml.data.graph import frame_to_graph

    record, cutoff = liquid_box(n, neighbours, seed)
    return Batch.from_data_list([frame_to_graph(record, cutoff, dtype)]), cutoff


def make_layer_case(method: str, channels: int, neighbours: int, n: int, device: str):
    from sciml.models.baselines import use_edge_convolutions
    from sciml.models.e2former.attention import Wigner6jAttention
    from sciml.models.e2former.context import GraphContext
    from sciml.models.e2former.settings import BlockSettings, EdgeSettings

    torch.manual_seed(0)
    batch, _ = periodic_system(n, neighbours)
    batch = batch.to(device)
    context = GraphContext.build(
        batch.pos, torch.zeros_like(batch.numbers), batch.batch, 1, batch.edge_index, batch.shifts, max_order=2
    )
    settings = BlockSettings(2, channels, heads=4, order=1, edges=EdgeSettings(48, channels), backend="auto")
    layer = Wigner6jAttention(settings).to(device)
    if method == "baseline":
        layer = use_edge_convolutions(layer).to(device)
    edge_features = torch.randn(context.distances.shape[0], 48, device=device)
    envelope = torch.rand(context.distances.shape[0], device=device)
    h = torch.randn(n, 9, channels, device=device, requires_grad=True)

    def run():
        layer(h, edge_features, envelope, context).sum().backward()

    return run


def make_model_case(n: int, device: str, neighbours: int = 16):
    from sciml.models import E2Former
    from sciml.nn.forces import ForceStressOutput

    torch.manual_seed(0)
    batch, cutoff = periodic_system(n, neighbours)
    batch = batch.to(device)
    model = E2Former([29], cutoff=cutoff, channels=64, layers=2, heads=4, avg_neighbours=neighbours).to(device).eval()
    potential = ForceStressOutput(model)

    def run():
        potential(copy.copy(batch))["forces"].sum().item()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--channels", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--neighbours", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 2048])
    parser.add_argument("--model-sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    add_result_arguments(parser)
    args = parser.parse_args()
    if args.smoke:
        args.channels, args.neighbours, args.sizes, args.model_sizes, args.repeats = [16], [8], [64], [64, 128], 1
    with recorded("attention_layer", "The E2Former attention layer against the per-edge e3nn layer", args.results):
        benchmark(args)


def benchmark(args) -> None:
    from sciml.equivariant.kernels import load

    load(with_cuda=args.device == "cuda")
    print(
        f"device {args.device}, {torch.get_num_threads()} threads, lmax 2, order 1, float32, layer forward + backward:"
    )
    print("| C | neighbours | N | E2Former ms | baseline ms | speedup | E2Former MiB | baseline MiB | memory ratio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = {}
    for channels in args.channels:
        for neighbours in args.neighbours:
            for n in args.sizes:
                case = (channels, neighbours, n, args.device)
                times = {
                    m: median_time(make_layer_case(m, *case), args.repeats, args.device)
                    for m in ("e2former", "baseline")
                }
                memory = {m: peak_memory(make_layer_case, (m, *case), args.device) for m in ("e2former", "baseline")}
                rows[channels, neighbours, n] = (times, memory)
                print(
                    f"| {channels} | {neighbours} | {n} | {times['e2former'] * 1e3:.1f} "
                    f"| {times['baseline'] * 1e3:.1f} "
                    f"| {times['baseline'] / times['e2former']:.2f} | {memory['e2former'] / 2**20:.1f} "
                    f"| {memory['baseline'] / 2**20:.1f} | {memory['baseline'] / max(memory['e2former'], 1):.2f} |",
                    flush=True,
                )
    print("\nfull model (C 64, 2 layers, 16 neighbours), energy + forces:")
    print("| N | ms | µs / atom |")
    print("| ---: | ---: | ---: |")
    sizes, seconds = [], []
    for n in args.model_sizes:
        elapsed = median_time(make_model_case(n, args.device), args.repeats, args.device)
        sizes.append(n)
        seconds.append(elapsed)
        print(f"| {n} | {elapsed * 1e3:.1f} | {elapsed / n * 1e6:.1f} |", flush=True)
    slope = float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])

    def ratio(neighbours: int, kind: int) -> float:
        key = (128, neighbours, 1024)
        if key not in rows:
            return float("nan")
        values = rows[key][kind]
        return values["baseline"] / max(values["e2former"], 1e-12)

    print(
        f"RESULT layer_speedup_k32_n1024_c128={ratio(32, 0):.2f} layer_speedup_k64_n1024_c128={ratio(64, 0):.2f} "
        f"layer_memory_ratio_k32_n1024_c128={ratio(32, 1):.2f} model_time_loglog_slope_vs_atoms={slope:.3f}"
    )


if __name__ == "__main__":
    main()
