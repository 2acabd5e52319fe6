"""Koopman losses as published and as sciml's options, side by side, plus alanine-dipeptide slow modes.

Systems with exact spectra: the 1-D Ornstein-Uhlenbeck process (theta 1, lag 0.5: sigma_n = exp(-n/2)) and
the noisy logistic map (r 4, cos^20 noise; singular values 1, .923, .892, .696, .657, eigenvalues 1,
-0.1933 +- 0.1909i, ...). Losses, each in its published setting (the NeuralKoopmanSVD code) and ours:

- nested LoRA (joint nesting): ``ustat`` (ours, unbiased) and ``plugin`` (the official same-batch plug-in);
- VAMP-2: published (centred covariances, least-squares whitening) and ours (raw moments with the constant,
  regularised eigendecomposition, deeptime's number);
- DPNet: published (relaxed, centred, regulariser mean_i(...) weighted 0.5 gamma, gamma 1) and the former
  sciml setting (strict score, raw moments, regulariser summed over the k eigenvalues weighted 0.01).

For each, k in {8, 20, 64} (constant included), batch in {96, 256} and 3 seeds, the encoders are trained for
``--steps`` Adam steps on the first 80 % of the trajectory, then the KoopmanEstimator (float64 moments on the
training pairs, CCA) gives:

- top-5 singular-value error: max_i |sigma_hat_i - sigma_i|, i <= 5;
- held-out VAMP-E: the last 20 % of the trajectory (pairs never seen in training) projected on the training
  CCA (``KoopmanEstimator.score``; 1 for the constant alone, at most sum_i sigma_i^2 of the exact top k);
- (logistic map) directed Hausdorff distance from all k learned eigenvalues (aligned Koopman matrix) to
  the 21 exact ones, and the error of the leading complex pair;
- NaN runs: a non-finite loss or estimate at any point; step time: median seconds per optimisation step.

Then the Prinz potential at lag 0.02 (joint vs sequential nesting, ``--prinz-epochs``) and alanine dipeptide
(``_koopman_alanine.py``): the E2Former encoder and an inverse-distance MLP against a deeptime MSM and a linear
VAMP on the dihedrals (``--alanine-epochs``; 0 skips either).

    python scripts/bench_koopman.py                          # full grid, Prinz and alanine: 32 min on 2 CPU cores
    python scripts/bench_koopman.py --quick                  # k 8 and 64, 1 seed, 1500 steps, 4-5 epochs after
    python scripts/bench_koopman.py --smoke --results /tmp/k  # k 8, 20 steps, 1 epoch: seconds

Results with provenance: ``benchmarks/results/koopman.{json,md}``.

Ends with ``RESULT lora_sval_err_logistic_k20=.. lora_heldout_vampe_logistic=.. dpnet_published_nan_runs=..
vamp_published_nan_runs=.. alanine_sigma2_heldout=.. alanine_its_ratio_vs_msm=..``: the LoRA (ours) values are
the worst over batch sizes of the median over seeds at k = 20, the NaN counts are over every run of the
published setting, the alanine values are the E2Former encoder's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from _results import add_result_arguments, recorded

from sciml.data.systems import NoisyLogisticMap, OrnsteinUhlenbeck, PrinzPotential
from sciml.koopman import DPNetLoss, KoopmanEstimator, LoRALoss, MLPEncoder, VAMPLoss
from sciml.koopman.functional import with_constant
from sciml.training import fit_koopman

ROOT = Path(__file__).resolve().parents[1]
FORMER_DPNET = {"metric_weight": 0.02, "relaxed": False, "center": False, "reduction": "sum", "whitening": "eigh"}
SETTINGS = {  # (loss, setting) -> loss module factory
    ("lora", "ours"): lambda: LoRALoss(estimator="ustat"),
    ("lora", "published"): lambda: LoRALoss(estimator="plugin"),
    ("vamp", "published"): lambda: VAMPLoss(),
    ("vamp", "ours"): lambda: VAMPLoss(whitening="eigh", center=False),
    ("dpnet", "published"): lambda: DPNetLoss(),
    ("dpnet", "ours"): lambda: DPNetLoss(epsilon=1e-6, **FORMER_DPNET),
}


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


def run(system: str, setting: tuple, k: int, batch: int, seed: int, steps: int, states, exact_svals, exact_eigs):
    torch.manual_seed(seed)
    n_train = int(0.8 * (len(states) - 1))
    x, y = states[:n_train], states[1 : n_train + 1]
    held_out = (states[n_train + 1 : -1], states[n_train + 2 :])  # pairs after the training ones
    f, g = make_encoder(system, k), make_encoder(system, k)
    loss_fn = SETTINGS[setting]()
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
    row.update(vampe=float("nan"), hausdorff=float("nan"), pair_err=float("nan"), pair_err_truncated=float("nan"))
    if not finite:
        return row
    try:
        estimator = KoopmanEstimator(f, g).fit((x, y))
        svals = estimator.singular_values.numpy()
        eigs = estimator.eigenvalues().numpy()
        row["vampe"] = estimator.score(held_out)["vampe"]
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


def worst_median(results: dict, key: str, system: str, setting: tuple, k: int, worst=max) -> float:
    """Worst over batch sizes of the median over seeds of ``key`` (nan when no such runs)."""
    chosen = [rows for run_key, rows in results.items() if run_key[:3] == (system, setting, k)]
    medians = [_median([r[key] for r in rows]) for rows in chosen]
    return worst(medians) if medians else float("nan")


def alanine_rows(epochs: int, kinds: tuple[str, ...] = ("distances", "e2former")) -> dict[str, dict[str, float]]:
    """The alanine-dipeptide comparison (see ``_koopman_alanine.py``) of the encoders ``kinds``, printed as it
    goes."""
    import _koopman_alanine as alanine

    phi, psi = alanine.dihedrals()
    n_train = int(alanine.SPLIT[0] * len(phi))
    test = slice(int((alanine.SPLIT[0] + alanine.SPLIT[1]) * len(phi)), None)
    msm_ps = alanine.msm_timescale(phi, psi, n_train)
    rows = {"dihedral VAMP": {**alanine.dihedral_vamp(phi, psi, n_train, test), "seconds": 0.0}}
    rows["dihedral VAMP"]["its_ratio"] = rows["dihedral VAMP"]["its_ps"] / msm_ps
    print(
        f"\nalanine dipeptide, lag {alanine.LAG} frames ({alanine.LAG * alanine.FRAME_PS:g} ps); "
        f"deeptime MSM (100 k-means states on phi, psi, training frames): slowest timescale {msm_ps:.1f} ps:"
    )
    for kind in kinds:
        estimator, data, seconds = alanine.train(kind, epochs)
        rows[kind] = {**alanine.evaluate(estimator, data, phi, msm_ps), "seconds": seconds}
    print(
        "| model | training s | sigma_2 (training) | held-out sigma_2 | VAMP-E test | slowest timescale ps | / MSM "
        "| CK largest deviation | CK | abs corr(eigenfunction 2, sign phi) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for name, row in rows.items():
        ck = "pass" if row.get("ck_passed") == 1.0 else ("fail" if "ck_passed" in row else "-")
        print(
            f"| {name} | {row['seconds']:.0f} | {row['sigma2']:.3f} | {row['sigma2_heldout']:.3f} "
            f"| {row['vampe_heldout']:.3f} | {row['its_ps']:.1f} | {row['its_ratio']:.3f} "
            f"| {row.get('ck_max_err', float('nan')):.3f} | {ck} | {row.get('corr_sign_phi', float('nan')):.3f} |",
            flush=True,
        )
    return rows


def prinz_rows(epochs: int) -> None:
    """Prinz potential at lag 0.02 (data/systems/prinz_fine.npz): eigenvalues and raw per-function correlations
    (no CCA) of joint and sequential nesting against the exact generator's exp(0.02 lambda_i), printed."""
    with np.load(ROOT / "data" / "systems" / "prinz_fine.npz") as archive:
        trajectories, dt = list(archive["trajectories"]), float(archive["dt"])
    exact = PrinzPotential(dt=dt).eigenvalues(1, 8).real
    print(f"\nPrinz potential, lag {dt:g}, k 8, MLP 64-64 tanh, {epochs} epochs, batch 512, Adam 3e-3:")
    print("| | " + " | ".join(str(i) for i in range(1, 9)) + " |")
    print("| --- |" + " ---: |" * 8)
    print("| exact exp(lag lambda_i) | " + " | ".join(f"{v:.4f}" for v in exact) + " |")
    for nesting in ("seq", "jnt"):
        options = {"hidden": (64, 64), "activation": "tanh"}
        estimator = fit_koopman(
            trajectories, 1, 8, epochs=epochs, batch_size=512, lr=3e-3, loss=LoRALoss(nesting), encoder_options=options
        )
        eigenvalues = estimator.eigenvalues().real.numpy()
        print(f"| {nesting}: eigenvalues | " + " | ".join(f"{v:.4f}" for v in eigenvalues) + " |")
        raw = estimator.function_correlations().numpy()
        print(f"| {nesting}: raw corr(f_i, g_i) | " + " | ".join(f"{v:.4f}" for v in raw) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ks", type=int, nargs="+", default=[8, 20, 64])
    parser.add_argument("--batches", type=int, nargs="+", default=[96, 256])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--systems", nargs="+", default=["ou", "logistic"])
    parser.add_argument("--alanine-epochs", type=int, default=12, help="0 skips the alanine comparison")
    parser.add_argument("--prinz-epochs", type=int, default=40, help="0 skips the Prinz nesting table")
    parser.add_argument("--quick", action="store_true", help="k 8 and 64, 1 seed, 1500 steps, 4-5 epochs after")
    add_result_arguments(parser)
    args = parser.parse_args()
    if args.smoke:
        args.ks, args.batches, args.seeds, args.steps, args.systems = [8], [96], 1, 20, ["ou", "logistic"]
        args.alanine_epochs, args.prinz_epochs = min(args.alanine_epochs, 1), min(args.prinz_epochs, 1)
    title = "Koopman losses as published and as sciml options; Prinz nesting; alanine dipeptide"
    with recorded("koopman", title, args.results):
        benchmark(args)


def benchmark(args) -> None:
    if args.quick:
        args.ks, args.seeds, args.steps = [8, 64], 1, 1500
        args.alanine_epochs, args.prinz_epochs = min(args.alanine_epochs, 4), min(args.prinz_epochs, 5)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    print(f"{torch.get_num_threads()} threads, {args.steps} Adam steps at lr 1e-3, medians over {args.seeds} seeds:")
    print(
        "| system | loss | setting | k | batch | top-5 sval err | held-out VAMP-E | Hausdorff | pair err "
        "| pair err (sigma > 0.1) | NaN runs | step ms |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    results: dict[tuple, list[dict]] = {}
    for system in args.systems:
        states, exact_svals, exact_eigs = system_data(system)
        for k in args.ks:
            for batch in args.batches:
                for setting in SETTINGS:
                    rows = [
                        run(system, setting, k, batch, seed, args.steps, states, exact_svals, exact_eigs)
                        for seed in range(args.seeds)
                    ]
                    results[system, setting, k, batch] = rows
                    med = {key: _median([r[key] for r in rows]) for key in rows[0] if key != "nan"}
                    print(
                        f"| {system} | {setting[0]} | {setting[1]} | {k} | {batch} | {med['sval_err']:.4f} "
                        f"| {med['vampe']:.4f} | {med['hausdorff']:.4f} | {med['pair_err']:.4f} "
                        f"| {med['pair_err_truncated']:.4f} | {sum(r['nan'] for r in rows)} | {med['step_ms']:.2f} |",
                        flush=True,
                    )
    if args.prinz_epochs:
        prinz_rows(args.prinz_epochs)
    kinds = ("distances",) if args.smoke else ("distances", "e2former")  # smoke: notebook 03 runs the E2Former one
    alanine = alanine_rows(args.alanine_epochs, kinds).get("e2former", {}) if args.alanine_epochs else {}

    def nan_runs(loss_name: str) -> int:
        return sum(r["nan"] for key, rows in results.items() if key[1] == (loss_name, "published") for r in rows)

    lora = ("lora", "ours")
    print(
        f"RESULT lora_sval_err_logistic_k20={worst_median(results, 'sval_err', 'logistic', lora, 20):.4f} "
        f"lora_heldout_vampe_logistic={worst_median(results, 'vampe', 'logistic', lora, 20, worst=min):.4f} "
        f"dpnet_published_nan_runs={nan_runs('dpnet')} vamp_published_nan_runs={nan_runs('vamp')} "
        f"alanine_sigma2_heldout={alanine.get('sigma2_heldout', float('nan')):.4f} "
        f"alanine_its_ratio_vs_msm={alanine.get('its_ratio', float('nan')):.4f}"
    )


if __name__ == "__main__":
    main()
