"""Exploration that finds every well: ethanol's hydroxyl rotor learned from its SMILES string alone (GFN2-xTB).

From the SMILES string at the pipeline's temperature (300 K), the on-the-fly loop (``sciml.active.ActiveLearning``
with the defaults of ``sciml learn``, a time budget and no confirmation run) runs once per exploration variant:

- ``one_start``: the default, one MMFF94 structure (a gauche rotamer) and unbiased exploration;
- ``conformers``: ``--conformers 3``, exploration from each of ethanol's three MMFF94 minima (both gauche
  rotamers and trans);
- ``biased``: ``--uncertainty-bias tau``, the rounds' MD on E - tau sigma_E (``sciml.uncertainty.biased``).

Each learned potential's relaxed C-C-O-H scan (``_rotor.rotor_profile``) is compared with GFN2-xTB's own: the
trans - gauche energy and the gauche -> trans barrier set the populations and the rate of the slow process, so
a potential that never saw the trans well or the barrier gets them wrong. Beside them: the labelled frames'
coverage of the rotor (the fraction in the trans well, |phi| > 150°, and near the barrier, 100° < |phi| < 150°),
the oracle calls and the loop's minutes.

Results with provenance: ``benchmarks/results/exploration.{json,md}``; each loop's directory in ``--work`` is
resumed (a finished loop is not run again).

    python scripts/bench_exploration.py [--budget 12 --work runs/bench_exploration]   # about 45 min
    python scripts/bench_exploration.py --smoke --results /tmp/exploration

Last line: RESULT trans_error_mev_<variant>=<x> ... barrier_error_mev_<variant>=<x> ... oracle_calls_<variant>=<n>
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
from _results import RESULTS, markdown_table, write_results
from _rotor import dihedrals, rotor_profile

from sciml.active import ActiveLearning, ExplorationSettings, LearningSettings, TrainingSettings, gfn2_xtb
from sciml.active.structures import conformers_from_smiles, molecule_from_smiles
from sciml.calculators import SciMLCalculator

SMILES = "CCO"


def variants(tau: float) -> dict[str, dict]:
    """The exploration variants: conformers (start structures) and the uncertainty bias."""
    return {"one_start": {"conformers": 1, "bias": 0.0}, "conformers": {"conformers": 3, "bias": 0.0},
            "biased": {"conformers": 1, "bias": tau}}  # fmt: skip


def learn(work: Path, name: str, variant: dict, settings: LearningSettings) -> tuple[Path, ActiveLearning]:
    """The loop of one variant in ``work/name`` (resumed; a finished loop returns its model at once)."""
    starts = conformers_from_smiles(SMILES, variant["conformers"], seed=0)
    exploration = replace(settings.exploration, uncertainty_bias=variant["bias"])
    loop = ActiveLearning(work / name, gfn2_xtb(), replace(settings, exploration=exploration),
                          report=lambda line: print(f"{name}: {line}", flush=True))  # fmt: skip
    return loop.run(starts if len(starts) > 1 else starts[0]), loop


def coverage(frames: list) -> dict:
    """The labelled frames' C-C-O-H dihedrals: fractions in the trans well and near the gauche -> trans barrier."""
    phi = np.abs(dihedrals(frames))
    return {"frames": len(frames), "trans_fraction": float(np.mean(phi > 150)),
            "barrier_fraction": float(np.mean((phi > 100) & (phi < 150)))}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--temperature", type=float, default=300.0, help="K: the loop's target (the pipeline's temperature)")
    add("--budget", type=float, default=12.0, help="minutes of each loop (its time budget)")
    add("--bias", type=float, default=2.0, help="tau of the biased variant, standard deviations of the energy")
    add("--work", default="runs/bench_exploration")
    add("--results", default=str(RESULTS))
    add("--smoke", action="store_true", help="tiny loops: checks the path in minutes")
    args = parser.parse_args()
    work = Path(args.work).resolve()
    # no confirmation (nor the calibration on the final model's MD before it): its runs (24,000 steps at 300 K, and
    # retrainings) would double each loop, and what is measured is the final model's rotor profile
    settings = LearningSettings(ExplorationSettings(temperature=args.temperature), TrainingSettings(), confirmations=0,
                                time_budget_min=args.budget, source=f"smiles:{SMILES}")  # fmt: skip
    angles, fmax = tuple(range(0, 181, 10)), 0.01
    if args.smoke:
        settings = replace(settings, exploration=ExplorationSettings(temperature=args.temperature, ramp_ps=0.05,
                                                                     hold_ps=0.05),
                           training=TrainingSettings(epochs=2, epochs_per_round=1, final_epochs=1), rounds=1,
                           seed_frames=8, confirmations=0, calibration_frames=0, time_budget_min=None)  # fmt: skip
        angles, fmax = (60, 120, 180), 0.5  # an untrained model's relaxations would take their 300 steps
    start = molecule_from_smiles(SMILES, 0)
    reference = rotor_profile(start, gfn2_xtb().factory(), angles, fmax)
    print(f"GFN2-xTB: trans - gauche {reference['trans_minus_gauche_mev']:.1f} meV, barrier "
          f"{reference['barrier_gauche_to_trans_mev']:.1f} meV", flush=True)  # fmt: skip
    rows = {}
    for name, variant in variants(args.bias).items():
        model, loop = learn(work, name, variant, settings)
        profile = rotor_profile(start, SciMLCalculator.from_checkpoint(model, dtype="float64"), angles, fmax)
        summary = loop.summary()
        rows[name] = {
            **variant, "model": str(model), "oracle_calls": summary["oracle_calls"],
            "minutes": sum(summary["seconds"].values()) / 60, "converged": summary["converged"],
            "confirmed": summary["confirmed"], "labelled": coverage(loop.store.labelled), "profile": profile,
            "trans_error_mev": profile["trans_minus_gauche_mev"] - reference["trans_minus_gauche_mev"],
            "barrier_error_mev": profile["barrier_gauche_to_trans_mev"] - reference["barrier_gauche_to_trans_mev"],
        }  # fmt: skip
        print(
            f"{name}: trans - gauche error {rows[name]['trans_error_mev']:+.1f} meV, barrier error "
            f"{rows[name]['barrier_error_mev']:+.1f} meV, {summary['oracle_calls']} oracle calls",
            flush=True,
        )
    table = markdown_table(
        ["variant", "oracle calls", "minutes", "labelled in trans / near the barrier", "trans - gauche (meV)",
         "gauche -> trans barrier (meV)"],
        [["GFN2-xTB (relaxed scan)", "", "", "", f"{reference['trans_minus_gauche_mev']:.1f}",
          f"{reference['barrier_gauche_to_trans_mev']:.1f}"]]
        + [[name, row["oracle_calls"], f"{row['minutes']:.1f}",
            f"{row['labelled']['trans_fraction']:.2f} / {row['labelled']['barrier_fraction']:.2f}",
            f"{row['profile']['trans_minus_gauche_mev']:.1f} ({row['trans_error_mev']:+.1f})",
            f"{row['profile']['barrier_gauche_to_trans_mev']:.1f} ({row['barrier_error_mev']:+.1f})"]
           for name, row in rows.items()],
    )  # fmt: skip
    result = {**{f"trans_error_mev_{n}": round(r["trans_error_mev"], 1) for n, r in rows.items()},
              **{f"barrier_error_mev_{n}": round(r["barrier_error_mev"], 1) for n, r in rows.items()},
              **{f"oracle_calls_{n}": r["oracle_calls"] for n, r in rows.items()}}  # fmt: skip
    data = {"smiles": SMILES, "temperature": args.temperature, "budget_min": args.budget, "bias": args.bias,
            "reference": reference, "variants": rows}  # fmt: skip
    notes = (f"Ethanol from its SMILES string alone, GFN2-xTB oracle, the loop's target {args.temperature:g} K, "
             f"{args.budget:g} minutes per loop, no confirmation run (`sciml learn` defaults otherwise; bias tau = "
             f"{args.bias:g}). Each "
             "learned potential's relaxed C-C-O-H scan against GFN2-xTB's (10° steps); in brackets, the error. "
             "Labelled in trans: |phi| > 150°; near the barrier: 100° < |phi| < 150°.")  # fmt: skip
    write_results("exploration", "Exploration from a SMILES string: every well of ethanol's rotor", [notes, table],
                  data, result, args.results)  # fmt: skip


if __name__ == "__main__":
    main()
