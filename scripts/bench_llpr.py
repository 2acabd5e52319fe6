"""Force uncertainty of one model (LLPR: the per-atom energy rigidity, the feature density, the last-layer
posterior ensemble) and of a committee, on the same frames.

One E2Former (the active-learning loop's ``small`` preset and training, ``sciml.active.train_round``) is trained
on ``data/aspirin_md/train_500K`` (GFN2-xTB, 500 K). Its last-layer uncertainty is then fitted on the same
training and validation splits three ways (:class:`sciml.uncertainty.LastLayerUncertainty`): the per-atom energy
rigidity (k = 0), the distance of each atom's features from the training atoms' under a ``--density-components``
mixture per element (the default estimate), and for each ``--samples`` k > 0 the spread of the forces of a
k-member last-layer ensemble drawn from the posterior. On the independent test runs at 400 K and 600 K (600 K:
100 K above the training run) it reports the Spearman correlation of the per-frame uncertainty with the per-frame
force RMSE, the coverage of ``|error| <= 2 sigma`` per force component, and the cost of an energy + forces call
with the estimate against the bare model (one structure; the median over 7 interleaved rounds of 30 calls each).
With ``--committee-epochs``, a four-member committee trained on the same frames and splits is the reference
estimate.

    python scripts/bench_llpr.py                        # about 11 min on 2 cores
    python scripts/bench_llpr.py --committee-epochs 20   # with the committee: over an hour
    python scripts/bench_llpr.py --smoke                # the same path on a few frames

Results with provenance: ``benchmarks/results/llpr.{json,md}`` and ``llpr_calibration.png`` (the reliability
diagram of the feature density at 600 K).

Last line: RESULT spearman_600k_density=<x> coverage_2sigma_600k_density=<x> cost_overhead_density=<x>
spearman_600k_rigidity=<x> spearman_600k_ensemble=<x> coverage_2sigma_600k_ensemble=<x> cost_overhead_ensemble=<x>
[spearman_600k_committee=<x>] (the ensemble: the largest k)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import ase.io
import numpy as np
import torch
from _bench_utils import calculator_seconds
from _results import RESULTS, markdown_table, write_results

from sciml.active import TrainingSettings, train_round
from sciml.active.training import round_data
from sciml.calculators import SciMLCalculator, load_model
from sciml.nn.checkpoint import write_model_checkpoint
from sciml.training import PotentialModule
from sciml.uncertainty.fitting import DENSITY_COMPONENTS, fit_last_layer_uncertainty
from sciml.uncertainty.report import calibration_report

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "aspirin_md"
HEADER = ["force uncertainty", "test", "F MAE meV/Å", "F RMSE meV/Å", "RMS σ_F meV/Å", "Spearman", "F within 2σ %",
          "ms/call", "cost"]  # fmt: skip


def fit(base: Path, splits, samples: int, components: int, out: Path) -> tuple[Path, float]:
    """The LLPR checkpoint of ``base``'s model with ``samples`` ensemble members or a feature density of
    ``components`` per element (both 0: the rigidity), fitted on ``splits``, the data module that trained it;
    returns its path and the fit's seconds."""
    model = load_model(base).model
    module = PotentialModule(model)
    begin = time.perf_counter()
    wrapped = fit_last_layer_uncertainty(model, splits.train_dataloader(), splits.val_dataloader(),
                                         module.in_model_dtype, samples, components)  # fmt: skip
    seconds = time.perf_counter() - begin
    with torch.no_grad():
        return write_model_checkpoint(wrapped, out / f"llpr_k{samples}_density{components}.ckpt"), seconds


def calibrate(row: dict, checkpoint: Path, tests: dict, reports: dict, key) -> dict:
    """``row`` with the calibration figures of ``checkpoint`` on each test set (``test_<T>K``, float64), its
    reports kept in ``reports[key, T]``."""
    calculator = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    for T, test in tests.items():
        reports[key, T] = report = calibration_report(calculator, test)
        mae = 1e3 * float(np.mean(np.abs(report.component_error)))
        row[f"test_{T}K"] = {**report.figures, "force_mae_mev_per_a": mae}
    hot = row["test_600K"]
    print(f"{row['name']}: Spearman at 600 K {hot['spearman_force']:.2f}, within 2 sigma "
          f"{100 * hot['coverage_2sigma_force']:.1f} %", flush=True)  # fmt: skip
    return row


def call_milliseconds(calculators: dict, atoms, rounds: int, calls: int = 30) -> dict:
    """Median ms of one energy + forces call of each calculator, timed in ``rounds`` interleaved rounds of
    ``calls`` calls (the machine's load changes over a minute; interleaving shares it fairly)."""
    times = {name: [] for name in calculators}
    for _ in range(rounds):
        for name, calculator in calculators.items():
            times[name].append(1e3 * calculator_seconds(calculator, atoms.copy(), calls))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--epochs", type=int, default=20, help="epochs of the model (bench_active's passive single model)")
    add("--samples", default="0,8,32", help="ensemble sizes k to compare (0: the energy rigidity)")
    add("--density-components", type=int, default=DENSITY_COMPONENTS, help="mixture components per element")
    add("--committee-epochs", type=int, default=0, help="epochs of a four-member committee (0: none)")
    add("--every", type=int, default=1, help="use every n-th test frame")
    add("--out", default=str(ROOT / "runs" / "bench_llpr"))
    add("--results", default=str(RESULTS))
    add("--smoke", action="store_true", help="a few frames and one epoch: checks the path in a minute")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    samples = [int(k) for k in args.samples.split(",")]
    frames = DATA / "train_500K.extxyz"
    if args.smoke:
        args.epochs, args.every, samples = 1, 50, [0, 2]
        args.committee_epochs = 1  # the committee's path too
        frames = out / "train_smoke.extxyz"
        ase.io.write(frames, ase.io.read(DATA / "train_500K.extxyz", index=":40"))
    settings = TrainingSettings(uncertainty="last-layer", epochs=args.epochs)
    base = out / "model" / "model.ckpt"
    timing = out / "model" / "training_s.json"  # a rerun reuses the model and reports its training time
    if not base.exists() or args.smoke:
        begin = time.perf_counter()
        train_round(frames, base.parent, settings, 0)
        timing.write_text(json.dumps(time.perf_counter() - begin))
    training_s = json.loads(timing.read_text())
    tests = {T: ase.io.read(DATA / f"test_{T}K.extxyz", index=f"::{args.every}") for T in (400, 600)}

    splits = round_data(frames, settings, 0)
    splits.setup("fit")
    rows, reports, paths = [], {}, {}
    estimates = [(0, 0, "energy rigidity", 0)] if 0 in samples else []
    estimates.append((0, args.density_components, f"feature density, K = {args.density_components}", "density"))
    estimates += [(k, 0, f"ensemble, k = {k}", k) for k in samples if k]
    for k, components, name, key in estimates:
        paths[key], fit_s = fit(base, splits, k, components, out)
        row = {"name": name, "samples": key, "density_components": components, "fit_s": fit_s}
        rows.append(calibrate(row, paths[key], tests, reports, key))
    if args.committee_epochs:  # the field's standard, trained on the same frames and splits
        committee = out / "committee" / "model.ckpt"
        if not committee.exists() or args.smoke:
            begin = time.perf_counter()
            train_round(frames, committee.parent, TrainingSettings(uncertainty="committee",
                                                                   epochs=args.committee_epochs), 0)  # fmt: skip
            (committee.parent / "training_s.json").write_text(json.dumps(time.perf_counter() - begin))
        paths["committee"] = committee
        row = {"name": f"committee, 4 x {args.committee_epochs} epochs", "samples": "committee",
               "training_s": json.loads((committee.parent / "training_s.json").read_text())}  # fmt: skip
        rows.append(calibrate(row, committee, tests, reports, "committee"))
    calculators = {"bare": SciMLCalculator(load_model(base).model)}
    calculators.update({k: SciMLCalculator.from_checkpoint(path, uncertainty=True) for k, path in paths.items()})
    milliseconds = call_milliseconds(calculators, tests[400][0], 2 if args.smoke else 7)
    bare_ms = milliseconds.pop("bare")
    for row in rows:
        row["ms_per_call"] = milliseconds[row["samples"]]
        row["overhead"] = row["ms_per_call"] / bare_ms - 1
    largest = max(samples)
    reports["density", 600].plot(out / "calibration.png", f"feature density ({args.density_components} components "
                                 "per element), trained at 500 K, tested at 600 K")  # fmt: skip
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    (results / "llpr_calibration.png").write_bytes((out / "calibration.png").read_bytes())

    table = []
    for row in rows:
        for T in (400, 600):
            f = row[f"test_{T}K"]
            table.append([row["name"], f"{T} K", f"{f['force_mae_mev_per_a']:.1f}", f"{1e3 * f['force_rmse']:.1f}",
                          f"{1e3 * f['force_uncertainty_rms']:.1f}", f"{f['spearman_force']:.2f}",
                          f"{100 * f['coverage_2sigma_force']:.1f}", f"{row['ms_per_call']:.1f}",
                          f"+{100 * row['overhead']:.0f} %"])  # fmt: skip
    by_k = {row["samples"]: row for row in rows}
    data = {"train": str(frames.relative_to(ROOT) if frames.is_relative_to(ROOT) else frames), "epochs": args.epochs,
            "training_s": training_s, "test_frames": {T: len(t) for T, t in tests.items()}, "bare_ms_per_call": bare_ms,
            "rows": rows}  # fmt: skip
    committee_note = (f" The committee: four members of the same preset trained together on the same frames and "
                      f"splits ({args.committee_epochs} epochs each, {rows[-1]['training_s'] / 60:.1f} min; its cost "
                      f"is against the single model)." if args.committee_epochs else "")  # fmt: skip
    sections = [
        f"One `small` E2Former trained {args.epochs} epochs on `{data['train']}` (GFN2-xTB, 500 K; the "
        f"active-learning loop's training, {training_s / 60:.1f} min), its last-layer uncertainty fitted on the "
        f"training and validation splits: the per-atom energy rigidity, the distance of each atom's features from "
        f"the training atoms' under a mixture of K Gaussians per element (the default), and the forces of k "
        f"posterior samples of the last layer. Test: "
        f"{len(tests[400])} and {len(tests[600])} frames of independent GFN2-xTB runs at 400 K and 600 K. Spearman: "
        f"per-frame RMS sigma against per-frame force RMSE; cost: one energy + forces call of one structure, "
        f"median of interleaved rounds (bare model {bare_ms:.1f} ms)." + committee_note,
        markdown_table(HEADER, table),
        "![reliability diagram](llpr_calibration.png)",
    ]
    result = {
        "spearman_600k_density": by_k["density"]["test_600K"]["spearman_force"],
        "coverage_2sigma_600k_density": by_k["density"]["test_600K"]["coverage_2sigma_force"],
        "cost_overhead_density": by_k["density"]["overhead"],
        "spearman_600k_rigidity": by_k[min(samples)]["test_600K"]["spearman_force"],
        "spearman_600k_ensemble": by_k[largest]["test_600K"]["spearman_force"],
        "coverage_2sigma_600k_ensemble": by_k[largest]["test_600K"]["coverage_2sigma_force"],
        "cost_overhead_ensemble": by_k[largest]["overhead"],
    }
    if args.committee_epochs:
        result["spearman_600k_committee"] = by_k["committee"]["test_600K"]["spearman_force"]
    title = "Force uncertainty: one model's last layer (rigidity, feature density, ensemble) and a committee" + (
        " (smoke run)" if args.smoke else ""
    )
    write_results("llpr", title, sections, data, result, results)


if __name__ == "__main__":
    main()
