"""Nested LoRA against VAMPnet (VAMP-2) and DPNet on the same data, encoder and optimiser.

Systems with exact spectra: the 1-D Ornstein-Uhlenbeck process (theta 1, lag 0.5: sigma_n = exp(-n/2)) and
the noisy logistic map (r 4, cos^20 noise; singular values 1, .923, .892, .696, .657, eigenvalues 1,
-0.1933 +- 0.1909i, ...). For each loss, k in {8, 32, 64} (constant included), batch in {96, 256} and
3 seeds, the encoders are trained for ``--steps`` Adam steps, then the KoopmanEstimator (float64 moments
on the training pairs, CCA) gives:

- top-5 singular-value error: max_i |sigma_hat_i - sigma_i|, i <= 5;
- (logistic map) directed Hausdorff distance from all k learned eigenvalues (aligned Koopman matrix) to
  the 21 exact ones, and the error of the leading complex pair;
  ("pair r": the same from the Koopman matrix of the singular triplets with sigma_hat > 0.1 only);
- NaN runs: a non-finite loss or estimate at any point; step time: median seconds per optimisation step.

    python scripts/bench_koopman.py                 # full grid, ~35 min on 2 CPU cores
    python scripts/bench_koopman.py --quick         # k 8 and 64, batch 96 and 256, 1 seed, fewer steps

Ends with ``RESULT lora_sval_err_ou=.. lora_sval_err_logistic=.. lora_nan_runs=.. vamp_nan_runs=..
dpnet_nan_runs=.. step_time_ratio_vamp_over_lora_k64=..``; the errors are the worst over (k, batch) of the
median over seeds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from sciml.data.systems import NoisyLogisticMap, OrnsteinUhlenbeck
from sciml.koopman import DPNetLoss, KoopmanEstimator, LoRALoss, MLPEncoder, VAMPLoss
from sciml.koopman.functional import with_constant

ROOT = Path(__file__).resolve().parents[1]
LOSSES = {"lora": LoRALoss, "vamp": VAMPLoss, "dpnet": DPNetLoss}


def system_data(name: str) -> tuple[torch.Tensor, np.ndarray, np.ndarray | None]:
    """(states (T, 1) float32, exact top singular values, exact eigenvalues or None)."""
    if name == "ou":
        system = OrnsteinUhlenbeck(1.0, 2**0.5, 0.5)
        states = system.simulate(500_000, seed=0)[0]  # high Hermite modes are heavy tailed: many samples
        return torch.as_tensor(states, dtype=torch.float32), np.exp(-0.5 * np.arange(5)), None
    system = NoisyLogisticMap()
    with np.load(ROOT / "data" / "systems" / "logistic.npz") as archive:
        states = archive["trajectories"][0]
    return torch.as_tensor(states, dtype=torch.float32), system.singular_values(1, 5), system.eigenvalues(1, 21)


def make_encoder(system: str, k: int) -> MLPEncoder:
    if system == "ou":
        return MLPEncoder(1, k - 1, hidden=(64, 64))
    return MLPEncoder(1, k - 1, hidden=(64, 128, 64), activation="leaky_relu", periodic=True)


def directed_hausdorff(learned: np.ndarray, exact: np.ndarray) -> float:
    """max over learned eigenvalues of the distance to the nearest exact one (complex plane)."""
    return float(np.abs(learned[:, None] - exact[None, :]).min(axis=1).max())


def pair_error(learned: np.ndarray, exact: np.ndarray) -> float:
    """Distance of the learned leading complex pair (entries 1, 2 by modulus) to the exact one."""
    return float(np.abs(learned[1:3, None] - exact[None, 1:3]).min(axis=1).max())


def run(system: str, loss_name: str, k: int, batch: int, seed: int, steps: int, states, exact_svals, exact_eigs):
    torch.manual_seed(seed)
    n_train = int(0.8 * (len(states) - 1))
    x, y = states[:n_train], states[1 : n_train + 1]
    f, g = make_encoder(system, k), make_encoder(system, k)
    loss_fn = LOSSES[loss_name]()
    optimizer = torch.optim.Adam([*f.parameters(), *g.parameters()], lr=1e-3)
    generator = torch.Generator().manual_seed(seed)
    times, finite = [], True
    for _ in range(steps):
        index = torch.randint(0, n_train, (batch,), generator=generator)
        start = time.perf_counter()
        loss = loss_fn(with_constant(f(x[index])), with_constant(g(y[index])))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        if not torch.isfinite(loss):
            finite = False
            break
    row = {"nan": not finite, "step_ms": 1e3 * statistics.median(times), "sval_err": float("nan")}
    row.update(hausdorff=float("nan"), pair_err=float("nan"), pair_err_truncated=float("nan"))
    if not finite:
        return row
    try:
        estimator = KoopmanEstimator(f, g).fit((x, y))
        svals = estimator.singular_values.numpy()
        eigs = estimator.eigenvalues().numpy()
    except (RuntimeError, torch.linalg.LinAlgError):
        row["nan"] = True
        return row
    if not (np.all(np.isfinite(svals)) and np.all(np.isfinite(eigs))):
        row["nan"] = True
        return row
    row["sval_err"] = float(np.abs(svals[:5] - exact_svals[:5]).max())
    if exact_eigs is not None:
        row["hausdorff"] = directed_hausdorff(eigs, exact_eigs)
        row["pair_err"] = pair_error(eigs, exact_eigs)
        rank = int((svals > 0.1).sum())  # drop the noisiest (smallest) singular triplets
        truncated = KoopmanEstimator(f, g, rank=rank)
        truncated.moments = estimator.moments
        row["pair_err_truncated"] = pair_error(truncated.eigenvalues().numpy(), exact_eigs)
    return row


def _median(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.median(finite)) if finite else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ks", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--batches", type=int, nargs="+", default=[96, 256])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--systems", nargs="+", default=["ou", "logistic"])
    parser.add_argument("--quick", action="store_true", help="k 8 and 64, 1 seed, 1500 steps")
    args = parser.parse_args()
    if args.quick:
        args.ks, args.seeds, args.steps = [8, 64], 1, 1500
    torch.set_num_threads(max(1, torch.get_num_threads()))
    print(f"threads={torch.get_num_threads()} steps={args.steps} Adam lr 1e-3, seeds={args.seeds}")
    header = (
        f"{'system':>8} {'loss':>6} {'k':>3} {'B':>4} {'sval err':>9} {'Hausdorff':>9} "
        f"{'pair err':>9} {'pair r':>7} {'NaN':>4} {'step ms':>8}"
    )
    print(header)
    results: dict[tuple, list[dict]] = {}
    for system in args.systems:
        states, exact_svals, exact_eigs = system_data(system)
        for k in args.ks:
            for batch in args.batches:
                for loss_name in LOSSES:
                    rows = [
                        run(system, loss_name, k, batch, seed, args.steps, states, exact_svals, exact_eigs)
                        for seed in range(args.seeds)
                    ]
                    results[system, loss_name, k, batch] = rows
                    med = {key: _median([r[key] for r in rows]) for key in rows[0] if key != "nan"}
                    print(
                        f"{system:>8} {loss_name:>6} {k:>3} {batch:>4} {med['sval_err']:>9.4f} "
                        f"{med['hausdorff']:>9.4f} {med['pair_err']:>9.4f} {med['pair_err_truncated']:>7.4f} "
                        f"{sum(r['nan'] for r in rows):>4} "
                        f"{med['step_ms']:>8.2f}",
                        flush=True,
                    )

    def worst_lora_error(system: str) -> float:
        keys = [key for key in results if key[0] == system and key[1] == "lora"]
        return max(statistics.median(r["sval_err"] for r in results[key]) for key in keys) if keys else float("nan")

    def nan_runs(loss_name: str) -> int:
        return sum(r["nan"] for key, rows in results.items() if key[1] == loss_name for r in rows)

    def step_time(loss_name: str, k: int) -> float:
        rows = [r for key, rs in results.items() if key[1] == loss_name and key[2] == k for r in rs]
        return statistics.median(r["step_ms"] for r in rows) if rows else float("nan")

    k_max = max(args.ks)
    errors = {system: worst_lora_error(system) for system in ("ou", "logistic")}
    print(
        f"RESULT lora_sval_err_ou={errors['ou']:.4f} lora_sval_err_logistic={errors['logistic']:.4f} "
        f"lora_nan_runs={nan_runs('lora')} vamp_nan_runs={nan_runs('vamp')} dpnet_nan_runs={nan_runs('dpnet')} "
        f"step_time_ratio_vamp_over_lora_k{k_max}={step_time('vamp', k_max) / step_time('lora', k_max):.3f}"
    )


if __name__ == "__main__":
    main()
