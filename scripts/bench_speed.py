"""The full E2Former against GFN2-xTB, MACE and NequIP, side by side on the same cores: energy + forces per call
and MD steps per second through each model's ASE calculator, on the systems of ``_systems.py``: ethanol (9
atoms), aspirin (21), palmitic acid (50, flexible), and fcc Cu boxes of 512 and 4096 atoms (a = 3.61 Å, cutoff
5 Å, ~42 neighbours), float32.

Models: the architectures the accuracy benchmark compares (``scripts/bench_accuracy.py``): E2Former's defaults
(C 64, lmax 2, 3 layers, shared edge trunk of width 32; MACE 0.3.16: 64x0e + 64x1o, L 1, 2 interactions,
correlation 3), so the E2Former/MACE ratio is speed at the accuracy of ``benchmarks/results/accuracy_vs_mace_*``.
Rows ``e2former``: ``SciMLCalculator``'s defaults (the ahead-of-time program of
:mod:`sciml.models.e2former.inference`, built once per model and cached; its build time is reported
apart), ``e2former_eager``: no compilation, ``e2former_layers``: ``torch.compile`` of the layers (compiled in
the warm-up calls). NequIP 0.19.1 with E2Former's irreps (64x0e + 64x1o + 64x2e), 3 layers, as a second peer (not
in the accuracy benchmark). GFN2-xTB (tblite, its ASE calculator) on the molecules: the reference these
potentials learn from, MD with it the user's alternative. Untrained weights (speed does not depend on them).
The arithmetic floor of the default E2Former's call on each molecule: its FLOPs (forward and force backward)
over a dense matmul's measured peak on the same cores.

Each (model, system) runs in its own process (``_speed_worker.py``; MACE in its own environment, built on
first use like ``bench_accuracy.py``), one after another, ``--threads`` threads each: medians of repeated
calls after warm-up calls, MD = ASE velocity Verlet (1 fs), peak RSS of the process.

    python scripts/bench_speed.py                    # ~25 min on 2 CPU cores (+ ~2 min to build the program once)
    python scripts/bench_speed.py --sizes molecule 512
    python scripts/bench_speed.py --smoke --results /tmp/speed    # E2Former and xTB on aspirin only

Then the per-edge multiply-adds of the default architecture against the same architecture as E2Former
computed it before the per-edge work was cut, and one case of ``bench_layers.py`` (the kernel-matched layer).
Results with provenance: ``benchmarks/results/speed.{json,md}``.

Last line: ``RESULT md_speedup_vs_xtb_21=<x> md_speedup_vs_nequip_21=<x> md_speedup_vs_mace_21=<x>
ms_per_call_21=<x> floor_ratio_21=<x> md_speedup_vs_mace_512=<x> md_speedup_vs_xtb_9=<x> md_speedup_vs_xtb_50=<x>
call_speedup_vs_mace_cu4096=<x> layer_speedup_lmax3_k64_matched=<x>
edge_macs_ratio_vs_before=<x>`` (MD speed-ups of the default E2Former over each peer; its call in ms on aspirin
and that over the floor; the per-edge layer's time over the factorised layer's with the same kernels; per-edge
multiply-adds now / before, below 1 is less work).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import add_result_arguments, recorded
from _systems import PALMITIC_ACID, write_palmitic_acid
from bench_accuracy import mace_python

SCRIPTS = Path(__file__).resolve().parent
# system -> (timed calls, warm-up calls, MD steps): ethanol (9 atoms), aspirin (21), palmitic acid (50), fcc Cu
PLAN = {"ethanol": (30, 3, 100), "molecule": (20, 3, 50), "palmitic": (20, 3, 50), "512": (5, 2, 10),
        "4096": (3, 1, 0)}  # fmt: skip
MOLECULES = ("ethanol", "molecule", "palmitic")
PROGRAM_CACHE = tempfile.mkdtemp(prefix="sciml-programs-")  # this run's ahead-of-time programs
# E2Former rows: the calculator's defaults (the ahead-of-time program), and the other inference paths
E2FORMER_ROWS = {
    "e2former": [],
    "e2former_eager": ["--compile", "eager"],
    "e2former_layers": ["--compile", "layers"],
}
KINDS = (*E2FORMER_ROWS, "mace", "nequip", "xtb")


def arithmetic_floor(name: str, threads: int, dtype: str) -> dict:
    """The floor of one energy + forces call of the default E2Former on a molecule: its floating-point work
    (torch's ``FlopCounterMode`` over the forward and the force backward of the pure-PyTorch reference path:
    matrix products and einsums; element-wise work is not counted, so the floor is a lower bound) over the
    peak rate of a dense matmul on the same cores."""
    import time

    import torch
    from _speed_worker import system
    from _systems import e2former
    from torch.utils.flop_counter import FlopCounterMode

    from sciml.calculators import SciMLCalculator

    torch.set_num_threads(threads)
    torch_dtype = getattr(torch, dtype)
    size = 1024
    a, b = torch.randn(size, size, dtype=torch_dtype), torch.randn(size, size, dtype=torch_dtype)
    for _ in range(3):
        a @ b
    start, repeats = time.perf_counter(), 20
    for _ in range(repeats):
        a @ b
    peak = 2 * size**3 * repeats / (time.perf_counter() - start)
    model = e2former("medium")
    for module in model.modules():
        if hasattr(module, "request"):
            module.request("reference")
    calculator = SciMLCalculator(model, dtype=dtype, compile="eager")
    atoms = system(name)
    batch = calculator._graph(atoms)
    with FlopCounterMode(display=False) as counter:
        calculator.inference(batch)
    flops = counter.get_total_flops()
    return {"flops": flops, "peak_gflops": peak / 1e9, "floor_s": flops / peak}


def measure(kind: str, name: str, threads: int, dtype: str, smoke: bool = False) -> dict:
    calls, warm, steps = (2, 1, 3) if smoke else PLAN[name]
    python = str(mace_python()) if kind == "mace" else sys.executable
    worker = "e2former" if kind in E2FORMER_ROWS else kind
    command = [python, str(SCRIPTS / "_speed_worker.py"), "--kind", worker, "--system", name, "--calls", str(calls)]
    command += ["--warm", str(warm), "--md-steps", str(steps), "--dtype", dtype, *E2FORMER_ROWS.get(kind, [])]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    env["SCIML_INFERENCE_CACHE"] = PROGRAM_CACHE  # empty at the start: the first E2Former call builds the program
    if kind == "mace":
        env.pop("PYTHONPATH", None)
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=SCRIPTS)
    if done.returncode:
        raise RuntimeError(f"{kind} on {name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def layer_speedup(threads: int, smoke: bool) -> float:
    """``bench_layers.py``'s kernel-matched speedup at lmax 3, order 1, K 64, 1024 atoms (one case)."""
    command = [sys.executable, str(SCRIPTS / "bench_layers.py"), "--lmax", "3", "--orders", "1"]
    command += ["--neighbours", "64", "--sizes", "1024"] if not smoke else ["--neighbours", "16", "--sizes", "64"]
    command += ["--repeats", "1" if smoke else "3", "--results", tempfile.mkdtemp()]  # its own files: not ours
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=SCRIPTS)
    if done.returncode:
        raise RuntimeError(f"bench_layers.py failed ({done.returncode}):\n{done.stderr[-3000:]}")
    print(done.stdout.strip().splitlines()[-2])  # its table row
    result = done.stdout.strip().splitlines()[-1]
    return float(result.split("layer_speedup_lmax3_k64_matched=")[1].split()[0])


def edge_work() -> tuple[dict, dict]:
    """Per-edge multiply-adds of the recommended architecture, and of the same architecture as E2Former
    computed it before the per-edge work was cut (per-layer edge MLPs of width C on the (E, 3R) features)."""
    from _systems import SPECIES

    from sciml.models import E2Former
    from sciml.models.e2former.cost import edge_multiply_adds

    before = {"edge_network": "per_layer", "edge_hidden": None}
    return edge_multiply_adds(E2Former(SPECIES)), edge_multiply_adds(
        E2Former(SPECIES, **before), per_pair_first_layers=False
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=list(PLAN), choices=list(PLAN))
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    add_result_arguments(parser)
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.kinds = ["molecule"], ["e2former", "xtb"]
    if "palmitic" in args.sizes and not PALMITIC_ACID.exists():
        write_palmitic_acid()
    with recorded("speed", "The full E2Former against MACE and NequIP (energy + forces, MD)", args.results):
        benchmark(args)


def benchmark(args) -> None:
    rows: dict[tuple[str, str], dict] = {}
    floors: dict[str, dict] = {}
    for name in args.sizes:
        for kind in args.kinds:
            if kind == "xtb" and name not in MOLECULES:
                continue  # GFN2-xTB is the molecules' reference, not the metal's
            rows[kind, name] = row = measure(kind, name, args.threads, args.dtype, args.smoke)
            print(f"# {kind} on {name}: {json.dumps(row)}", flush=True)
        if name in MOLECULES:
            floors[name] = arithmetic_floor(name, args.threads, args.dtype)
            print(f"# floor on {name}: {json.dumps(floors[name])}", flush=True)
    print(f"\n{args.dtype}, {args.threads} threads; seconds per energy + forces call (median), MD steps/s, peak RSS:")
    print("| system | atoms | model | parameters | s / call | MD steps/s | peak RSS MiB | speed-up of e2former |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for (kind, name), row in rows.items():
        own = rows.get(("e2former", name))
        ratio = row["call_s"] / own["call_s"] if own else float("nan")
        if "md_steps_per_s" in row and own:
            ratio = own["md_steps_per_s"] / row["md_steps_per_s"]
        steps = f"{row['md_steps_per_s']:.2f}" if "md_steps_per_s" in row else "-"
        print(f"| {name} | {row['atoms']} | {kind} | {row['parameters']} | {row['call_s']:.4f} | {steps} "
              f"| {row['peak_rss_mib']:.0f} | {'-' if kind == 'e2former' else f'{ratio:.2f}x'} |")  # fmt: skip

    print("\nthe default E2Former's first call (the ahead-of-time program built, or loaded from the cache):")
    for (kind, name), row in rows.items():
        if kind == "e2former":
            print(f"- {name}: {row['first_call_s']:.1f} s, of which building the program {row['compile_s']:.1f} s; "
                  f"{row['inference']}")  # fmt: skip
    print("\narithmetic floor (FLOPs of forward + force backward / dense-matmul peak, same cores):")
    print("| system | atoms | GFLOP per call | matmul peak GFLOP/s | floor ms | e2former ms | call / floor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, floor in floors.items():
        own = rows.get(("e2former", name))
        call = own["call_s"] if own else float("nan")
        print(f"| {name} | {own['atoms'] if own else '-'} | {floor['flops'] / 1e9:.3f} | {floor['peak_gflops']:.1f} "
              f"| {floor['floor_s'] * 1e3:.2f} | {call * 1e3:.2f} | {call / floor['floor_s']:.1f} |")  # fmt: skip

    def speedup(name: str, key: str, peer_kind: str = "mace") -> float:
        own, peer = rows.get(("e2former", name)), rows.get((peer_kind, name))
        if not own or not peer or key not in own:
            return float("nan")
        return own[key] / peer[key] if key == "md_steps_per_s" else peer[key] / own[key]

    after, before = edge_work()
    print("\nper-edge multiply-adds of one forward (sciml.models.e2former.cost.edge_multiply_adds):")
    print("| part | before | now |")
    print("| --- | ---: | ---: |")
    for part in after:
        print(f"| {part} | {before[part]} | {after[part]} |")
    print("\nkernel-matched layer (bench_layers.py, lmax 3, order 1, K 64, 1024 atoms):")
    matched = layer_speedup(args.threads, args.smoke)
    aspirin = rows.get(("e2former", "molecule"), {})
    floor_ratio = aspirin.get("call_s", float("nan")) / floors["molecule"]["floor_s"] if "molecule" in floors else None
    print(
        f"RESULT md_speedup_vs_xtb_21={speedup('molecule', 'md_steps_per_s', 'xtb'):.2f} "
        f"md_speedup_vs_nequip_21={speedup('molecule', 'md_steps_per_s', 'nequip'):.2f} "
        f"md_speedup_vs_mace_21={speedup('molecule', 'md_steps_per_s'):.2f} "
        f"ms_per_call_21={aspirin.get('call_s', float('nan')) * 1e3:.2f} "
        f"floor_ratio_21={floor_ratio if floor_ratio is not None else float('nan'):.1f} "
        f"md_speedup_vs_mace_512={speedup('512', 'md_steps_per_s'):.2f} "
        f"md_speedup_vs_xtb_9={speedup('ethanol', 'md_steps_per_s', 'xtb'):.2f} "
        f"md_speedup_vs_xtb_50={speedup('palmitic', 'md_steps_per_s', 'xtb'):.2f} "
        f"call_speedup_vs_mace_cu4096={speedup('4096', 'call_s'):.2f} "
        f"layer_speedup_lmax3_k64_matched={matched:.2f} "
        f"edge_macs_ratio_vs_before={after['total'] / before['total']:.3f}"
    )


if __name__ == "__main__":
    main()
