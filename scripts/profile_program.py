"""Where one energy + forces call of the default E2Former's ahead-of-time program spends its time, on a molecule.

The program (:mod:`sciml.models.e2former.inference`) is built a second time with Inductor's kernel profiling on
(``torch._inductor.config.cpp.enable_kernel_profile``: every generated C++ kernel records itself), then called
under ``torch.profiler``; each recorded operator goes to one of four parts:

- ``matrix products``: the program's calls to ATen's ``mm`` / ``addmm`` / ``bmm`` (MKL);
- ``sciml kernels``: the ``sciml::`` custom operators (CG contraction, edge aggregation, edge dot), called through
  AOTInductor's proxy executor;
- ``allocation and copies``: ``empty``, ``zeros``, ``copy_``, ``expand`` and the like around them;
- ``fused element-wise``: Inductor's generated C++ kernels (every other operation, fused).

The untouched program's median call (no profiling) is timed too, and the arithmetic floor of the same call (its
matrix-product FLOPs, counted as ``bench_speed.py`` counts them, over a dense matmul's measured peak).
Untrained weights of the defaults (speed does not depend on them), float32.

    python scripts/profile_program.py                       # aspirin (21 atoms), 2 threads: ~5 min
    python scripts/profile_program.py --system ethanol --threads 1

Results with provenance: ``benchmarks/results/program_profile.{json,md}`` (``program_profile_<n>_thread`` with
``--threads`` n other than 2). Last line: ``RESULT
call_ms=<x> matrix_products_share=<x> sciml_kernels_share=<x> allocation_share=<x> elementwise_share=<x>
matrix_product_calls=<n> floor_ratio=<x>``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from _results import RESULTS, markdown_table, write_results

PARTS = ("matrix products", "sciml kernels", "allocation and copies", "fused element-wise")
MATRIX_PRODUCTS = ("aoti_torch_cpu_mm_out", "aoti_torch_cpu_addmm_out", "aoti_torch_cpu_bmm_out", "aten::mm",
                   "aten::addmm", "aten::bmm")  # fmt: skip


def part_of(name: str) -> str | None:
    """The part an operator recorded by the profiler belongs to (``None``: an operator recorded inside another,
    counted there)."""
    if name in MATRIX_PRODUCTS:
        return "matrix products"
    if name.startswith("sciml::"):
        return "sciml kernels"
    if "cpp_fused" in name:
        return "fused element-wise"
    if name.startswith("aten::"):
        return "allocation and copies"
    return None


def median_call_ms(runner, inputs, calls: int) -> float:
    for _ in range(10):
        runner(*inputs)
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        runner(*inputs)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds) * 1e3


def profile(system_name: str, threads: int, calls: int) -> dict:
    import torch
    from _speed_worker import e2former_calculator, system
    from bench_speed import arithmetic_floor
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from sciml.models.e2former.inference import CompiledEnergyForces, topology_of

    torch.set_num_threads(threads)
    calculator, _ = e2former_calculator("float32", 5.0, compile="eager")
    atoms = system(system_name)
    batch = calculator._graph(atoms)
    model = calculator.model
    topology = topology_of(model, batch)
    inputs = (batch.pos, batch.shifts.to(batch.pos.dtype), *topology.tensors())
    with tempfile.TemporaryDirectory() as cache:
        plain = CompiledEnergyForces(model, batch, cache=f"{cache}/plain")
        call_ms = median_call_ms(plain.runner, inputs, calls)
        with torch._inductor.config.patch({"cpp.enable_kernel_profile": True}):
            profiled = CompiledEnergyForces(model, batch, cache=f"{cache}/profiled")
        for _ in range(10):  # warm-up
            profiled.runner(*inputs)
        with torch_profile(activities=[ProfilerActivity.CPU]) as recorder:
            for _ in range(calls):
                profiled.runner(*inputs)
    operators = {}
    for event in recorder.key_averages():
        part = part_of(event.key)
        if part is not None:
            operators[event.key] = {"part": part, "calls_per_call": event.count / calls,
                                    "ms_per_call": event.self_cpu_time_total / 1e3 / calls}  # fmt: skip
    parts = {part: {"ms": 0.0, "calls": 0.0} for part in PARTS}
    for operator in operators.values():
        parts[operator["part"]]["ms"] += operator["ms_per_call"]
        parts[operator["part"]]["calls"] += operator["calls_per_call"]
    floor = arithmetic_floor(system_name, threads, "float32")
    return {"system": system_name, "atoms": len(atoms), "edges": int(batch.edge_index.shape[1]), "threads": threads,
            "call_ms": call_ms, "profiled_ms": sum(p["ms"] for p in parts.values()), "parts": parts,
            "operators": operators, "floor_ms": floor["floor_s"] * 1e3, "flops": floor["flops"],
            "peak_gflops": floor["peak_gflops"], "compile_s": plain.compile_seconds}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", default="molecule", help="ethanol, molecule (aspirin) or palmitic")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--results", default=str(RESULTS), help="folder of the results files (.json and .md)")
    args = parser.parse_args()
    run = profile(args.system, args.threads, args.calls)
    total = run["profiled_ms"]
    rows = [[part, f"{p['calls']:.0f}", f"{p['ms']:.3f}", f"{p['ms'] / total:.2f}"] for part, p in run["parts"].items()]
    top = sorted(run["operators"].items(), key=lambda item: -item[1]["ms_per_call"])[:12]
    top_rows = [[name[:60], o["part"], f"{o['calls_per_call']:.0f}",
                 f"{o['ms_per_call'] * 1e3 / o['calls_per_call']:.1f}", f"{o['ms_per_call']:.3f}"]
                for name, o in top]  # fmt: skip
    table = markdown_table(["part", "calls per call", "ms per call", "share"], rows)
    operators = markdown_table(["operator", "part", "calls per call", "µs each", "ms per call"], top_rows, "llrrr")
    note = (f"{run['system']} ({run['atoms']} atoms, {run['edges']} edges), float32, {run['threads']} threads. "
            f"The program's median call: {run['call_ms']:.2f} ms; under the profiler (kernels recording "
            f"themselves) {total:.2f} ms. Floor: {run['flops'] / 1e9:.3f} GFLOP at a dense matmul's "
            f"{run['peak_gflops']:.0f} GFLOP/s = {run['floor_ms']:.2f} ms.")  # fmt: skip
    print(note + "\n\n" + table + "\n\n" + operators)
    shares = {part: run["parts"][part]["ms"] / total for part in PARTS}
    result = {"call_ms": run["call_ms"], "matrix_products_share": shares["matrix products"],
              "sciml_kernels_share": shares["sciml kernels"], "allocation_share": shares["allocation and copies"],
              "elementwise_share": shares["fused element-wise"],
              "matrix_product_calls": int(round(run["parts"]["matrix products"]["calls"])),
              "floor_ratio": run["call_ms"] / run["floor_ms"]}  # fmt: skip
    sections = [
        note,
        "Per part (self time of each operator, per energy + forces call):",
        table,
        "The operators that take the most time:",
        operators,
    ]
    stem = "program_profile" + ("" if args.threads == 2 else f"_{args.threads}_thread")
    write_results(stem, "Where the ahead-of-time program's call goes", sections, run, result, args.results)


if __name__ == "__main__":
    main()
