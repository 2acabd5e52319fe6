"""What a committee's members should train on: every frame (shared) or each its own bootstrap resample (bagging).

Both committees have four E2Former members trained one after the other with ``sciml.active.train_round`` (the
loop's training, its defaults), each member from its own initialisation and in its own batch order; they differ
only in ``TrainingSettings.committee_data``:

- ``shared``: every member on the whole training split (DP-GEN's independent trainings on one data set);
- ``bootstrap``: each member on its own bootstrap resample of the training split (as many draws with
  replacement as frames: about 63 % of them, some twice), so that the members disagree more where frames are few.

Data: ``scripts/bench_active.py``'s paracetamol reference frames (GFN2-xTB Langevin MD; 1500 training frames at
500 K, independent test runs at 500 and 600 K, 200 frames each), read from its ``--out`` folder or generated
there with the same seeds, and a longer independent run at 600 K (``--long-frames`` 1000 frames every 40 steps,
its own seed), over which a Spearman correlation is known to about +-0.05 where 200 frames leave +-0.1. Both
committees are calibrated on the same validation split, then tested on the three runs: force MAE, the Spearman
correlation of per-frame force uncertainty with per-frame force RMSE (95 % bootstrap interval), the paired
difference of the two Spearman correlations over the same resampled frames, and the coverage of
``|error| <= 2 sigma`` per force component. The ``RESULT`` figures are the long run's.

Results with provenance: ``benchmarks/results/committee_data.{json,md}``. Trained committees are kept in
``--out`` and reused by a rerun.

    python scripts/bench_committee.py [--epochs 20] [--size 4]
    python scripts/bench_committee.py --smoke --results /tmp/committee   # minutes: the same path, tiny budgets

Last line: RESULT spearman_shared=<x> spearman_bootstrap=<x> spearman_difference=<x>
force_mae_ratio_bootstrap_vs_shared=<x> coverage_2sigma_bootstrap=<x>
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import ase.io
import numpy as np
from _results import RESULTS, markdown_table, write_results
from bench_active import SMILES, evaluate, reference_md, reference_sets, spearman_text, stage_timings

from sciml.active import TrainingSettings, train_round
from sciml.active.structures import molecule_from_smiles

ROOT = Path(__file__).resolve().parents[1]
DESIGNS = ("shared", "bootstrap")
TESTS = {"test": "500 K", "test_hot": "600 K", "test_hot_long": "600 K, long run"}


def paired_spearman_difference(first, second) -> dict:
    """Spearman(second) - Spearman(first) on the same frames, with its 95 % percentile interval over the
    reports' bootstrap resamplings of the frames, the same ones for both (paired): the two committees' figures
    share the frames' noise, so their difference is known far better than either figure alone."""
    differences = second.bootstrap_spearman() - first.bootstrap_spearman()
    measured = second.figures["spearman_force"] - first.figures["spearman_force"]
    return {"difference": float(measured), "interval": [float(v) for v in np.nanpercentile(differences, [2.5, 97.5])]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--epochs", type=int, default=20, help="epochs of each member")
    add("--size", type=int, default=4, help="members per committee")
    add("--long-frames", type=int, default=1000, help="frames of the long independent test run at 600 K")
    add("--out", default=str(ROOT / "runs" / "bench_active"), help="bench_active.py's folder: frames, committees")
    add("--results", default=str(RESULTS))
    add("--smoke", action="store_true", help="tiny budgets: checks the path in minutes")
    args = parser.parse_args()
    passive_frames, passive_every, test_frames, equilibrate = 1500, 20, 200, 2000
    if args.smoke:
        passive_frames, passive_every, test_frames, equilibrate, args.epochs = 40, 5, 20, 20, 1
        args.long_frames = 30
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    timings_path = out / "committee_timings.json"
    timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
    start = molecule_from_smiles(SMILES, 0)
    shared_timings = stage_timings(out, Path(args.results))  # bench_active's: a frame set made here adds to them
    sets = reference_sets(out, start, 500.0, passive_frames, passive_every, test_frames, equilibrate, shared_timings)
    long_run = out / f"test_hot_long_{args.long_frames}.extxyz"
    if not long_run.exists():
        begin = time.perf_counter()
        ase.io.write(long_run, reference_md(start, 600.0, args.long_frames, 40, 4, equilibrate))
        timings[long_run.name] = time.perf_counter() - begin
        timings_path.write_text(json.dumps(timings, indent=1))
    sets["test_hot_long"] = ase.io.read(long_run, index=":")

    figures, reports = {}, {}
    for design in DESIGNS:
        settings = TrainingSettings(uncertainty="committee", committee_size=args.size, epochs=args.epochs,
                                    committee_data=design)  # fmt: skip
        directory = out / f"committee_{design}_{args.size}x{args.epochs}"
        if not (directory / "model.ckpt").exists():
            begin = time.perf_counter()
            train_round(out / "passive.extxyz", directory, settings, 0)
            timings[directory.name] = time.perf_counter() - begin
            timings_path.write_text(json.dumps(timings, indent=1))
        row = {"training_s": timings.get(directory.name)}
        for name in TESTS:
            row[name], reports[design, name] = evaluate(directory / "model.ckpt", sets[name])
        figures[design] = row
        print(f"{design}: {row['test']['force_mae_mev_per_a']:.1f} / {row['test_hot']['force_mae_mev_per_a']:.1f} "
              f"meV/Å, Spearman at 600 K {spearman_text(row['test_hot_long'])} (long run)", flush=True)  # fmt: skip
    paired = {name: paired_spearman_difference(reports["shared", name], reports["bootstrap", name])
              for name in TESTS}  # fmt: skip
    data = {"smiles": SMILES, "atoms": len(start), "members": args.size, "epochs": args.epochs,
            "training_frames": len(sets["passive"]), "test_frames": len(sets["test"]),
            "long_frames": len(sets["test_hot_long"]), "committees": figures,
            "bootstrap_minus_shared": paired}  # fmt: skip
    shared, bagged = figures["shared"]["test_hot_long"], figures["bootstrap"]["test_hot_long"]
    result = {
        "spearman_shared": shared["spearman_force"],
        "spearman_bootstrap": bagged["spearman_force"],
        "spearman_difference": paired["test_hot_long"]["difference"],
        "force_mae_ratio_bootstrap_vs_shared": bagged["force_mae_mev_per_a"] / shared["force_mae_mev_per_a"],
        "coverage_2sigma_bootstrap": bagged["coverage_2sigma_force"],
    }
    title = "A committee's members on shared data or on bootstrap resamples" + (" (smoke run)" if args.smoke else "")
    write_results("committee_data", title, sections(data), data, result, args.results)


def sections(data: dict) -> list[str]:
    rows = []
    for design, row in data["committees"].items():
        minutes = f"{row['training_s'] / 60:.1f}" if row["training_s"] is not None else "-"
        for name, label in TESTS.items():
            f = row[name]
            coverage = [f"{100 * f['coverage_2sigma_force']:.1f}", f"{100 * f['coverage_2sigma_energy']:.1f}"]
            rows.append([design, minutes, label, f"{f['force_mae_mev_per_a']:.1f}", f"{1e3 * f['force_rmse']:.1f}",
                         f"{1e3 * f['force_uncertainty_rms']:.1f}", spearman_text(f), *coverage])  # fmt: skip
    paired = data["bootstrap_minus_shared"]
    differences = "; ".join(
        f"{label} {paired[name]['difference']:+.3f} ({paired[name]['interval'][0]:+.3f} to "
        f"{paired[name]['interval'][1]:+.3f})"
        for name, label in TESTS.items()
    )
    return [
        f"Molecule `{data['smiles']}` ({data['atoms']} atoms); {data['members']} members of {data['epochs']} epochs "
        f"each, trained on {data['training_frames']} GFN2-xTB frames at 500 K (less the validation split); "
        f"tested on {data['test_frames']} frames of independent runs at 500 K and 600 K and on {data['long_frames']} "
        "frames of a longer independent run at 600 K (its own seed).",
        markdown_table(["members train on", "training min", "test", "F MAE meV/Å", "F RMSE meV/Å", "RMS σ_F meV/Å",
                        "Spearman (95 % CI)", "F within 2σ %", "E within 2σ %"], rows),  # fmt: skip
        f"Spearman of bootstrap minus shared on the same frames (paired bootstrap, 95 %): {differences}.",
    ]  # fmt: skip


if __name__ == "__main__":
    main()
