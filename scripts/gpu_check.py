"""One command for a CUDA machine: build the CUDA kernels, run the CUDA tests, print kernel-vs-reference
errors (float64: values, first and second derivatives) and timings (kernel vs reference vs e3nn).

    python scripts/gpu_check.py            # about 6-10 minutes on one GPU, most of it compiling

Then the full-model table: E2Former (eager, compiled, compiled with CUDA graphs over fixed-capacity neighbour
buffers) against MACE on the same GPU, aspirin and fcc Cu boxes of 4096 and 32768 atoms (scripts/_systems.py),
and the exported model (metatomic, CUDA kernels) against SciMLCalculator on CUDA (``bench_md.py --export-only``).

It exits non-zero if a check fails. On a machine without a GPU it says so and exits 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def max_errors(function_reference, function_kernel, inputs, probe) -> list[float]:
    def derivatives(function):
        out = function(*inputs)
        first = torch.autograd.grad((out * probe).sum(), inputs, create_graph=True)
        second = torch.autograd.grad(sum((g * torch.cos(g)).sum() for g in first), inputs)
        return [out, *first, *second]

    return [
        float((a - b).detach().abs().max())
        for a, b in zip(derivatives(function_reference), derivatives(function_kernel), strict=True)
    ]


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device visible: nothing to check here")
        return 2
    print(f"torch {torch.__version__} CUDA {torch.version.cuda} on {torch.cuda.get_device_name()}")
    from sciml.equivariant.graph import EdgeGraph
    from sciml.equivariant.kernels import load
    from sciml.equivariant.operations import cg_contract, edge_aggregate
    from sciml.equivariant.tensor_product import expansion_table

    start = time.perf_counter()
    print(f"built {load(with_cuda=True)} in {time.perf_counter() - start:.0f} s")
    failed = subprocess.call(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/equivariant/test_kernels.py",
            "tests/interfaces/test_metatomic.py",
            "-k",
            "cuda or opcheck",
        ],
        cwd=ROOT,
    )
    generator = torch.Generator().manual_seed(0)
    n, e, channels = 500, 16000, 64
    receivers = torch.randint(0, n, (e,), generator=generator).cuda()
    senders = torch.randint(0, n, (e,), generator=generator).cuda()
    graph, _ = EdgeGraph.from_edges(receivers, senders, n, n)
    alpha = (torch.randn(e, channels, generator=generator, dtype=torch.float64) * 0.3).cuda().requires_grad_()
    x = (torch.randn(n, 9, channels, generator=generator, dtype=torch.float64) * 0.3).cuda().requires_grad_()
    probe = torch.randn(n, 9, channels, dtype=torch.float64, device="cuda")
    errors = max_errors(
        lambda a, b: edge_aggregate(a, b, graph, "reference"),
        lambda a, b: edge_aggregate(a, b, graph, "cuda"),
        (alpha, x),
        probe,
    )
    print(
        "edge_aggregate float64 max |kernel - reference| (value, d/dalpha, d/dx, d2/dalpha2, d2/dx2):",
        " ".join(f"{v:.2e}" for v in errors),
    )
    table = expansion_table((0, 1, 2), 2, 4)
    y = (torch.randn(n, 5, 1, generator=generator, dtype=torch.float64)).cuda().requires_grad_()
    probe = torch.randn(n, table.out_dim, channels, dtype=torch.float64, device="cuda")
    tp_errors = max_errors(
        lambda a, b: cg_contract(a, b, table, "reference"), lambda a, b: cg_contract(a, b, table, "cuda"), (x, y), probe
    )
    print("cg_contract float64 max |kernel - reference|:", " ".join(f"{v:.2e}" for v in tp_errors))
    ok = max(errors + tp_errors) <= 1e-12 and failed == 0
    subprocess.call(
        [
            sys.executable,
            "scripts/bench_kernels.py",
            "--device",
            "cuda",
            "--sizes",
            "256",
            "1024",
            "4096",
            "--e3nn-max",
            "4096",
        ],
        cwd=ROOT,
    )
    full_model_table()
    print("\nexported model (metatomic) against SciMLCalculator on the GPU:", flush=True)
    subprocess.call(
        [sys.executable, "bench_md.py", "--export-only", "--export-device", "cuda", "--export-sizes", "4096", "32768",
         "--results", str(ROOT / "benchmarks" / "results" / "gpu")],
        cwd=ROOT / "scripts",
    )  # fmt: skip
    print("GPU CHECK", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


# (model row, worker arguments); MACE runs with cuequivariance's kernels when its environment has them
GPU_ROWS = {
    "e2former eager": ["--kind", "e2former"],
    "e2former compiled": ["--kind", "e2former", "--compile"],
    "e2former compiled + CUDA graphs": ["--kind", "e2former", "--compile", "--static"],
    "mace (cuequivariance if installed)": ["--kind", "mace"],
}
GPU_PLAN = {"molecule": (20, 5, 100), "4096": (10, 3, 50), "32768": (5, 2, 10)}  # calls, warm-up, MD steps


def full_model_table(timeout_s: float = 900.0) -> None:
    """The full models through their ASE calculators on this GPU (``_speed_worker.py``, one process per row and
    system, float32), with atoms x MD steps per second and ns/day at 1 fs. MACE needs its own environment
    (``bench_accuracy.mace_python``, a CUDA build of torch); a row that cannot run says why."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_accuracy import mace_python

    print("\nfull model on the GPU, float32: s/call (median), MD steps/s, atoms x steps/s, ns/day at 1 fs")
    print("| system | atoms | model | s / call | MD steps/s | atoms x steps / s | ns/day |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for name, (calls, warm, steps) in GPU_PLAN.items():
        for label, arguments in GPU_ROWS.items():
            try:
                python = str(mace_python()) if "mace" in label else sys.executable
                command = [python, str(ROOT / "scripts" / "_speed_worker.py"), *arguments, "--device", "cuda"]
                command += ["--system", name, "--calls", str(calls), "--warm", str(warm), "--md-steps", str(steps)]
                done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT / "scripts", timeout=timeout_s)
                if done.returncode:
                    raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed")
                row = json.loads(done.stdout.strip().splitlines()[-1])
            except Exception as error:  # one row's failure (no MACE environment, out of memory) is reported
                print(f"| {name} | - | {label} | not measured: {str(error)[:120]} | | | |", flush=True)
                continue
            rate = row["md_steps_per_s"]
            print(
                f"| {name} | {row['atoms']} | {label} | {row['call_s']:.4f} | {rate:.2f} | {rate * row['atoms']:.3g} "
                f"| {rate * 86400 * 1e-6:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
