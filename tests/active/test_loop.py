"""The on-the-fly loop end to end on water with GFN2-xTB (milliseconds a call) and tiny trainings: the store,
resuming without relabelling or retraining, interrupted labelling, oracle failures, ``sciml learn``."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import ase.io
import numpy as np
import pytest
import torch
from ase import Atoms

from sciml.active import (
    ActiveLearning,
    ExplorationSettings,
    LearningSettings,
    Oracle,
    OracleFailure,
    TrainingSettings,
    gfn2_xtb,
    rattled_copies,
)
from sciml.calculators import SciMLCalculator, load_model
from sciml.commands import learn
from sciml.uncertainty.report import calibration_report
from tests.conftest import ROOT

WATER = Atoms("OH2", positions=[[0.0, 0.0, 0.0], [0.97, 0.0, 0.0], [-0.25, 0.93, 0.0]])


class CountingOracle(Oracle):
    """GFN2-xTB that counts its calls and fails (``error``) on the calls numbered in ``fail_on``."""

    def __init__(self, fail_on: tuple[int, ...] = (), error: type[BaseException] = OracleFailure) -> None:
        xtb = gfn2_xtb()
        super().__init__(xtb.name, xtb.factory)
        self.calls, self.fail_on, self.error = 0, fail_on, error

    def label(self, atoms: Atoms) -> Atoms:
        self.calls += 1
        if self.calls in self.fail_on:
            raise self.error(f"GFN2-xTB: call {self.calls} refused by the test")
        return super().label(atoms)


def tiny_settings(
    rounds: int, uncertainty: str = "committee", confirmations: int = 0, calibration_frames: int = 0
) -> LearningSettings:
    """Every MD step is above a 1e-4 eV/Å threshold, so every round labels ``cap`` frames; no confirmation runs
    of the final model unless asked for (each would label ``cap`` more), and no calibration frames."""
    exploration = ExplorationSettings(temperature=300, start_temperature=100, ramp_ps=0.01, hold_ps=0.01,
                                      threshold=1e-4, stop_factor=1e6, cap=3, spacing_fs=2.0)  # fmt: skip
    training = TrainingSettings(uncertainty=uncertainty, committee_size=2, epochs=2, epochs_per_round=1, final_epochs=1,
                                batch_size=4, validation_fraction=0.25)  # fmt: skip
    return LearningSettings(exploration, training, rounds=rounds, seed_frames=8, source="smiles:O",
                            confirmations=confirmations, confirm_hold_ps=0.02,
                            calibration_frames=calibration_frames)  # fmt: skip


def test_the_loop_labels_each_round_and_resumes_without_relabelling_or_retraining(tmp_path):
    oracle = CountingOracle()
    final = ActiveLearning(tmp_path, oracle, tiny_settings(rounds=2), report=lambda line: None).run(WATER)
    labelled = ase.io.read(tmp_path / "labelled.extxyz", index=":")
    assert oracle.calls == len(labelled) == 8 + 3 + 3
    assert [frame.info["round"] for frame in labelled] == [0] * 8 + [1] * 3 + [2] * 3
    picked = labelled[8]
    assert picked.info["key"].startswith("round1-run0-step") and picked.info["uncertainty"] > 1e-4
    assert "above the threshold" in picked.info["reason"] and picked.info["oracle"] == "GFN2-xTB"
    state = json.loads((tmp_path / "state.json").read_text())
    assert not state["converged"] and [r["picked"] for r in state["rounds"]] == [3, 3]
    assert all(state["seconds"][phase] > 0 for phase in ("oracle", "training", "md"))
    calculator = SciMLCalculator.from_checkpoint(final)
    water = WATER.copy()
    water.calc = calculator
    water.get_forces()
    assert calculator.results["forces_uncertainty"].shape == (3,)

    trained = {path: path.stat().st_mtime_ns for path in tmp_path.glob("*/model.ckpt")}
    assert len(trained) == 3  # round1, round2 and final
    again = CountingOracle()
    ActiveLearning(tmp_path, again, tiny_settings(rounds=2), report=lambda line: None).run(WATER)
    assert again.calls == 0  # everything was labelled, every round trained
    assert {path: path.stat().st_mtime_ns for path in tmp_path.glob("*/model.ckpt")} == trained
    longer = tiny_settings(rounds=2)
    longer.training.final_epochs = 2  # other final epochs: only the final model trains again
    ActiveLearning(tmp_path, again, longer, report=lambda line: None).run(WATER)
    retrained = {path: path.stat().st_mtime_ns for path in tmp_path.glob("*/model.ckpt")}
    assert again.calls == 0 and [path.parent.name for path in trained if retrained[path] != trained[path]] == ["final"]
    trained = retrained
    ActiveLearning(tmp_path, again, tiny_settings(rounds=3), report=lambda line: None).run(WATER)
    assert again.calls == 3 and (tmp_path / "round3" / "model.ckpt").exists()  # more rounds continue the run
    assert (tmp_path / "final" / "model.ckpt").stat().st_mtime_ns > trained[tmp_path / "final" / "model.ckpt"]


def test_no_exploration_rounds_trains_the_final_model_on_the_seed_set_and_says_so(tmp_path):
    oracle, lines = CountingOracle(), []
    final = ActiveLearning(tmp_path, oracle, tiny_settings(rounds=0), report=lines.append).run(WATER)
    assert oracle.calls == 8 and final.exists() and (tmp_path / "final" / "model.ckpt").exists()
    assert any("no exploration rounds: the final model trains on the 8 seed frames" in line for line in lines)
    assert not any("not converged" in line for line in lines)
    settings = tiny_settings(rounds=0)
    settings.training.final_epochs = 0
    with pytest.raises(ValueError, match="rounds 0 and final_epochs 0 train no model"):
        ActiveLearning(tmp_path / "none", CountingOracle(), settings).run(WATER)
    with pytest.raises(ValueError, match="rounds is -1"):
        ActiveLearning(tmp_path / "negative", CountingOracle(), tiny_settings(rounds=-1)).run(WATER)
    assert not (tmp_path / "none" / "labelled.extxyz").exists()  # refused before any label


def test_a_round_trains_at_the_settings_learning_rate_not_the_long_runs_default(tmp_path, monkeypatch):
    """The loop's short trainings keep the recipe's schedule at their own peak (5e-3), not the 1e-2 of
    ``PotentialModule``'s long-run default; a non-positive rate is refused."""
    from sciml.active import training
    from sciml.training.schedules import WarmupCosine

    seen = []

    class Recording(training.PotentialModule):
        def configure_optimizers(self):
            seen.append(super().configure_optimizers())
            return seen[-1]

    monkeypatch.setattr(training, "PotentialModule", Recording)
    oracle = CountingOracle()
    ase.io.write(tmp_path / "frames.extxyz", [oracle.label(frame) for frame in rattled_copies(WATER, 8)])
    settings = tiny_settings(rounds=0).training
    assert settings.learning_rate == 5e-3
    training.train_round(tmp_path / "frames.extxyz", tmp_path / "round", settings, round=0, epochs=1)
    assert len(seen) == settings.committee_size == 2  # one training per member
    for configured in seen:
        optimizer, scheduler = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
        assert optimizer.defaults["lr"] == 5e-3 and optimizer.defaults["amsgrad"]
        assert isinstance(scheduler, WarmupCosine)
    with pytest.raises(ValueError, match="learning_rate must be positive"):
        TrainingSettings(learning_rate=0.0)


def test_committee_members_train_one_by_one_in_their_own_batch_orders_and_the_committee_is_calibrated(
    tmp_path, monkeypatch
):
    """DP-GEN's independent trainings: each member its own run over the same split, its batches in another
    order; then the committee's two scales from the validation split (NaN until then)."""
    import torch

    from sciml.active import training
    from sciml.calculators import load_model
    from sciml.uncertainty import Committee

    orders, train = [], training.train_energy_model

    def recording_training(model, data, *args):
        orders.append([list(batch.energy.numpy()) for batch in data.train_dataloader()])
        return train(model, data, *args)

    monkeypatch.setattr(training, "train_energy_model", recording_training)
    ase.io.write(tmp_path / "frames.extxyz", [CountingOracle().label(frame) for frame in rattled_copies(WATER, 12)])
    settings = tiny_settings(rounds=0).training  # a committee of two
    checkpoint = training.train_round(tmp_path / "frames.extxyz", tmp_path / "round", settings, round=0, epochs=1)
    first, second = orders
    assert sorted(sum(first, [])) == sorted(sum(second, [])) and first != second  # one split, two orders
    committee = load_model(checkpoint)
    assert isinstance(committee, Committee) and committee.calibrated
    a, b = (dict(member.named_parameters()) for member in committee.members)
    assert any(not torch.equal(a[name], b[name]) for name in a)


def test_bagged_committee_members_each_train_on_their_own_bootstrap_resample(tmp_path, monkeypatch):
    """committee_data="bootstrap": each member's epoch is as many frames as the training split, drawn from it
    with repeats, and the members' resamples differ; the data module goes back to the whole split afterwards.
    An unknown design is refused."""
    from collections import Counter

    from sciml.active import training

    seen, modules, train = [], [], training.train_energy_model

    def recording_training(model, data, *args):
        split = sorted(float(e) for batch in data.split_dataloader("train") for e in batch.energy)
        seen.append((split, Counter(float(e) for batch in data.train_dataloader() for e in batch.energy)))
        modules.append(data)
        return train(model, data, *args)

    monkeypatch.setattr(training, "train_energy_model", recording_training)
    ase.io.write(tmp_path / "frames.extxyz", [CountingOracle().label(frame) for frame in rattled_copies(WATER, 12)])
    settings = replace(tiny_settings(rounds=0).training, committee_data="bootstrap")
    training.train_round(tmp_path / "frames.extxyz", tmp_path / "round", settings, round=0, epochs=1)
    (split, first), (_, second) = seen
    for drawn in (first, second):
        assert sum(drawn.values()) == len(split) and set(drawn) <= set(split)
        assert max(drawn.values()) > 1 and len(drawn) < len(split)  # repeats, so some frames left out
    assert first != second
    assert not modules[-1].bootstrap_training and modules[-1].shuffle_offset == 0
    with pytest.raises(ValueError, match="committee_data must be one of"):
        TrainingSettings(committee_data="subsets")


def test_an_interrupted_run_resumes_with_only_the_missing_labels_and_failures_are_recorded(tmp_path):
    interrupted = CountingOracle(fail_on=(5,), error=KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        ActiveLearning(tmp_path, interrupted, tiny_settings(1, "last-layer"), report=lambda line: None).run(WATER)
    assert len(ase.io.read(tmp_path / "labelled.extxyz", index=":")) == 4  # the four labelled before the kill
    failing = CountingOracle(fail_on=(2,))
    lines = []
    ActiveLearning(tmp_path, failing, tiny_settings(1, "last-layer"), report=lines.append).run(WATER)
    assert failing.calls == 4 + 3  # the four missing seed frames, then round 1's three
    failed = ase.io.read(tmp_path / "failed.extxyz", index=":")
    assert len(failed) == 1 and failed[0].info["key"] == "seed-5" and "refused by the test" in failed[0].info["error"]
    assert len(ase.io.read(tmp_path / "labelled.extxyz", index=":")) == 4 + 3 + 3
    assert any("oracle failed on seed-5" in line for line in lines)
    with pytest.raises(ValueError, match="holds a run with source 'smiles:O', not 'smiles:C'"):
        settings = tiny_settings(1)
        settings.source = "smiles:C"
        ActiveLearning(tmp_path, failing, settings)


def test_the_learn_config_runs_on_a_tiny_budget_and_writes_the_checkpoint_store_and_summary(tmp_path):
    config = ROOT / "configs" / "learn" / "aspirin.yaml"
    tiny = "--ramp-ps 0.01 --hold-ps 0.01 --threshold 1e-4 --stop-factor 1e6 --cap 2 --spacing-fs 2 --rounds 1"
    tiny += " --seed-frames 6 --epochs 2 --final-epochs 1 --batch-size 4 --no-progress --force-samples 2"
    tiny += " --confirmations 0 --committee-data bootstrap"
    summary = learn.main(["--config", str(config), "--output", str(tmp_path), *tiny.split()])
    assert summary["oracle_calls"] == summary["labelled"] == 6 + 2 and summary["failed"] == 0
    assert summary["settings"]["exploration"]["temperature"] == 500  # from the config
    assert summary["settings"]["exploration"]["replicas"] == 4  # its exploration_replicas: batched runs
    assert summary["settings"]["time_budget_min"] == 55  # its time_budget
    assert json.loads((tmp_path / "summary.json").read_text())["labelled"] == 8
    store = ase.io.read(tmp_path / "labelled.extxyz", index=":")
    assert store[0].get_chemical_formula() == "C9H8O4" and store[-1].info["round"] == 1  # aspirin, from SMILES
    calculator = SciMLCalculator.from_checkpoint(tmp_path / "model.ckpt", uncertainty=True)
    assert calculator.reports_uncertainty and calculator.model.force_samples == 2  # the LLPR ensemble, as asked
    assert summary["settings"]["training"]["force_samples"] == 2 and summary["settings"]["confirmations"] == 0
    assert summary["settings"]["training"]["committee_data"] == "bootstrap"  # passed on (a committee's option)
    with pytest.raises(ValueError, match="force_samples must be 0"):
        TrainingSettings(force_samples=-1)


def test_the_learn_config_parses_and_unknown_keys_are_refused(tmp_path):
    options = learn.parse(["--config", str(ROOT / "configs" / "learn" / "aspirin.yaml"), "--rounds", "3"])
    assert options.smiles == "CC(=O)Oc1ccccc1C(=O)O" and options.temperature == 500 and options.rounds == 3
    config = str(ROOT / "configs" / "learn" / "ethanol_dft.yaml")  # bench_dft's two-level route
    dft = learn.parse(["--config", config])
    assert (dft.smiles, dft.oracle, dft.pretrain, dft.basis, dft.time_budget) == ("CCO", "pyscf", "gfn2-xtb",
                                                                                  "def2-SVP", 55)  # fmt: skip
    assert dft.transfer == "difference" and dft.pool_frames == 1000  # DFT - GFN2-xTB, distilled
    assert learn.parse(["--config", config, "--pretrain", "none"]).pretrain is None  # its DFT-alone route
    second = learn.parse(["--config", str(ROOT / "configs" / "learn" / "n_methylacetamide_dft.yaml")])
    differing = {key for key, value in vars(second).items() if vars(dft)[key] != value}
    assert differing == {"config", "smiles", "output"} and second.smiles == "CNC(C)=O"  # bench_dft's second molecule
    bad = tmp_path / "bad.yaml"
    bad.write_text("smiles: O\ntemprature: 500\n")
    with pytest.raises(SystemExit, match="unknown options \\['temprature'\\]"):
        learn.parse(["--config", str(bad)])
    with pytest.raises(SystemExit):
        learn.parse(["--smiles", "O", "--structure", "water.xyz"])


def test_sciml_learn_without_the_oracle_extra_names_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "rdkit.Chem", None)  # an environment without RDKit
    with pytest.raises(SystemExit, match=r"a start from a SMILES string needs the 'rdkit' package: .*sciml\[oracle\]"):
        learn.main(["--smiles", "O", "--output", str(tmp_path)])


def test_an_unreadable_structure_is_an_error_naming_the_file(tmp_path):
    broken = tmp_path / "start.xyz"
    broken.write_text("not a structure\n")
    with pytest.raises(ValueError, match=f"cannot read a structure from '{broken}'"):
        learn.main(["--structure", str(broken), "--output", str(tmp_path / "run")])


def test_a_round_whose_runs_end_early_starts_new_ones_until_the_cap(tmp_path):
    from sciml.active import Candidate, Exploration

    calls = []

    def short_run(starts, model, settings, seed, on_step):  # every run ends at step 20 with one candidate
        (start,) = starts
        calls.append(seed)
        frame = start.copy()
        frame.positions += 0.01 * len(calls)
        return [Exploration(20, 1.0, [Candidate(20, 10.0, 300.0, 1.0, frame)], stopped=True)]

    settings = tiny_settings(rounds=1)
    settings.exploration.cap, settings.exploration.hold_ps = 4, 1.0  # a budget of 2020 steps
    ActiveLearning(tmp_path, CountingOracle(), settings, report=lambda line: None, explorer=short_run).run(WATER)
    state = json.loads((tmp_path / "state.json").read_text())["rounds"][0]
    assert len(calls) == len(set(calls)) == 4  # four runs, each with its own seed, one pick each
    assert state["runs"] == 4 and state["picked"] == 4 and state["md_steps"] == 80
    keys = [frame.info["key"] for frame in ase.io.read(tmp_path / "labelled.extxyz", index="8:")]
    assert keys == [f"round1-run{r}-step20" for r in range(4)]


def test_several_starts_share_the_seed_set_take_turns_and_converge_only_when_every_start_does(tmp_path):
    from sciml.active import Candidate, Exploration

    turned = WATER.copy()
    turned.positions[2] = [-0.25, -0.93, 0.0]  # another "conformer": the second H on the other side
    starts, calls = [WATER, turned], []

    def run(batch, model, settings, seed, on_step):  # a full run; uncertain only where the test says
        (start,) = batch
        round, origin = seed // 1000, next(i for i, s in enumerate(starts) if np.allclose(s.positions, start.positions))
        calls.append((round, origin))
        uncertain = round == 1 or (round, origin) == (2, 0)
        candidates = [Candidate(40, 20.0, 300.0, 1.0, start.copy())] if uncertain else []
        return [Exploration(settings.steps, 1.0 if uncertain else 1e-5, candidates)]

    loop = ActiveLearning(tmp_path, CountingOracle(), tiny_settings(rounds=3), report=lambda line: None, explorer=run)
    loop.run(starts)
    labelled = ase.io.read(tmp_path / "labelled.extxyz", index=":")
    keys = [frame.info["key"] for frame in labelled]
    assert keys[:8] == [f"seed-{k}" for k in range(4)] + [f"seed-start1-{k}" for k in range(4)]
    assert np.abs(labelled[4].positions - turned.positions).max() < 0.2  # rattled around the second start
    # each round's runs take the starts in turn, beginning one further each round; round 2 is not converged
    # though its run from start 1 stayed below the threshold, round 3 is: both starts stayed below
    assert calls == [(1, 0), (1, 1), (2, 1), (2, 0), (3, 0), (3, 1)]
    assert [frame.info["reason"][-12:] for frame in labelled[8:]] == ["from start 0", "from start 1", "from start 0"]
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["converged"] and [r["below_threshold"] for r in state["rounds"]] == [False, False, True]
    with pytest.raises(ValueError, match="start structure 1 has other atoms"):
        ActiveLearning(tmp_path / "other", CountingOracle(), tiny_settings(1)).run([WATER, Atoms("H2")])


def test_the_final_model_is_confirmed_and_retrained_while_its_run_goes_above_the_threshold(tmp_path):
    """The rounds check their own models; the final model, the one written, has runs of its own (the longer
    confirm_hold_ps) at or below ``confirm_level`` times the threshold, labels what they pick and retrains until one
    stays below, at most ``confirmations`` times."""
    from sciml.active import Candidate, Exploration

    calls = []

    def run(starts, model, settings, seed, on_step):  # above the threshold on the calls numbered in `uncertain`
        (start,) = starts
        calls.append((seed // 1000, settings.hold_ps, settings.threshold))
        frame = start.copy()
        frame.positions += 0.01 * len(calls)
        above = len(calls) in uncertain
        candidates = [Candidate(40, 20.0, 300.0, 1.0, frame)] if above else []
        return [Exploration(settings.steps, 1.0 if above else 1e-5, candidates)]

    uncertain, lines = {1, 3}, []  # round 1, then the first confirmation
    settings = tiny_settings(2, confirmations=2)
    ActiveLearning(tmp_path, CountingOracle(), settings, report=lines.append, explorer=run).run(WATER)
    # round 2 converged; the final model ran twice, at 0.8 x the threshold
    assert calls == [(1, 0.01, 1e-4), (2, 0.01, 1e-4), (3, 0.02, 8e-5), (4, 0.02, 8e-5)]
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["converged"] and state["confirmed"]
    assert [(c["below_threshold"], c.get("labelled")) for c in state["confirmations"]] == [(False, 1), (True, None)]
    last = ase.io.read(tmp_path / "labelled.extxyz", index="-1")
    assert last.info["key"] == "final2-confirm1-run0-step40" and last.info["round"] == 3
    assert last.info["reason"].endswith("(confirmation of the final model, at 0.8 x the threshold)")
    written, final = ((tmp_path / name / "model.ckpt").read_bytes() for name in ("", "final"))
    assert written == (tmp_path / "confirm1" / "model.ckpt").read_bytes() != final  # the retrained model
    assert not (tmp_path / "confirm2" / "model.ckpt").exists() and any("final model confirmed" in x for x in lines)

    again = CountingOracle()  # resuming runs, labels and trains nothing more
    ActiveLearning(tmp_path, again, tiny_settings(2, confirmations=2), report=lambda line: None, explorer=run).run(
        WATER
    )
    assert again.calls == 0 and len(calls) == 4 and (tmp_path / "model.ckpt").read_bytes() == written

    settings = tiny_settings(2, confirmations=2)  # another level: the final model is confirmed anew
    settings.confirm_level = 0.5
    ActiveLearning(tmp_path, CountingOracle(), settings, report=lambda line: None, explorer=run).run(WATER)
    assert calls[4:] == [(3, 0.02, 5e-5)] and json.loads((tmp_path / "state.json").read_text())["confirmed"]
    assert (tmp_path / "model.ckpt").read_bytes() == final  # confirmed unchanged: the final model itself
    settings.training.final_epochs = 2  # a final model trained anew is confirmed anew
    ActiveLearning(tmp_path, CountingOracle(), settings, report=lambda line: None, explorer=run).run(WATER)
    assert calls[5:] == [(3, 0.02, 5e-5)] and (tmp_path / "model.ckpt").read_bytes() != final

    uncertain, lines = set(range(1, 10)), []  # never below: one retraining, then the written model says so
    settings = tiny_settings(1, confirmations=1)
    ActiveLearning(tmp_path / "u", CountingOracle(), settings, report=lines.append, explorer=run).run(WATER)
    state = json.loads((tmp_path / "u" / "state.json").read_text())
    assert not state["confirmed"] and len(state["confirmations"]) == 2
    assert any("final model not confirmed after 1 retrainings" in line for line in lines)
    assert (tmp_path / "u" / "model.ckpt").read_bytes() == (tmp_path / "u" / "confirm1" / "model.ckpt").read_bytes()
    for wrong in ({"confirmations": -1}, {"confirm_level": 0.0}, {"confirm_level": 1.5}):
        with pytest.raises(ValueError, match="confirmations must be >= 0"):
            LearningSettings(**wrong)


def test_a_time_budget_ends_the_exploration_fits_the_final_training_and_skips_a_retraining(tmp_path):
    """Round 1 always runs; a later round only if it and the final stage fit in what is left of the budget. The
    final training gets the time left less the calibration and confirmation (at least a tenth of the budget), and
    a confirmation's retraining that would not fit is left out, the model written unconfirmed."""
    from sciml.active.training import train_round as real

    given = []

    def train_round(frames, directory, settings, round, previous=None, epochs=None, max_seconds=None):
        # the store's frames and the last model, in memory (nothing read back from disk)
        assert isinstance(frames, list) and len(frames) >= 8 and all(isinstance(f, Atoms) for f in frames)
        assert (previous is None) == (directory.name == "round1") and not isinstance(previous, str | Path)
        given.append((directory.name, max_seconds))
        return real(frames, directory, settings, round, previous, epochs, max_seconds)

    settings, lines = tiny_settings(3, "last-layer", confirmations=1), []
    settings.time_budget_min = 0.01  # 0.6 s: spent by the seed set and round 1
    oracle = CountingOracle()
    ActiveLearning(tmp_path, oracle, settings, report=lines.append, trainer=train_round).run(WATER)
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["budget_ended_after"] == 1 and len(state["rounds"]) == 1 and not (tmp_path / "round2").exists()
    assert any("would not fit in the" in line and "exploration ends after round 1" in line for line in lines)
    assert given == [("round1", None), ("final", pytest.approx(0.06))]  # a tenth of the budget: overrun
    assert oracle.calls == 8 + 3 + 3  # the seed, round 1 and the confirmation's picks, labelled and kept
    assert not state["confirmed"] and any("would not fit in the time budget" in line for line in lines)
    assert (tmp_path / "model.ckpt").read_bytes() == (tmp_path / "final" / "model.ckpt").read_bytes()

    given.clear()
    settings = tiny_settings(2, "last-layer", confirmations=1)
    settings.time_budget_min = 600.0  # resumed with more time: round 2 runs; the final training may take nearly all
    resumed = ActiveLearning(tmp_path, CountingOracle(), settings, report=lambda line: None, trainer=train_round)
    resumed.run(WATER)
    assert [name for name, _ in given] == ["round2", "final", "confirm1"]  # the confirmation's retraining fits
    assert resumed.summary()["budget_ended_after"] is None and 35_000 < given[1][1] < 36_000
    with pytest.raises(ValueError, match="time_budget_min must be positive"):
        LearningSettings(time_budget_min=0.0)


def test_the_written_model_is_calibrated_on_labelled_frames_of_its_own_md(tmp_path):
    """Before each confirmation run the model's MD gives ``calibration_frames`` frames uniform in time after
    the ramp; labelled, they refit both scales (RMS sigma = RMS error over them), stay in the store and are not
    counted as the confirmation's picks. Every run here goes above the 1e-4 eV/Å threshold: two calibrations."""
    oracle, lines = CountingOracle(), []
    settings = tiny_settings(1, "last-layer", confirmations=1, calibration_frames=4)
    written = ActiveLearning(tmp_path, oracle, settings, report=lines.append).run(WATER)
    state = json.loads((tmp_path / "state.json").read_text())
    records = state["confirmations"]
    assert [record["calibration"]["frames"] for record in records] == [4, 4] and not state["confirmed"]
    assert records[0]["labelled"] == 3 and records[1]["model"].endswith("confirm2/calibrated.ckpt")
    labelled = ase.io.read(tmp_path / "labelled.extxyz", index=":")
    frames = [frame for frame in labelled if frame.info["key"].startswith("final1-confirm1-calibration")]
    assert [frame.info["round"] for frame in frames] == [2] * 4 and oracle.calls == len(labelled) == 8 + 3 + 4 + 3 + 4
    times = [float(frame.info["reason"].split("uniform in time, ")[1].split(" fs")[0]) for frame in frames]
    assert times == [12.5, 15.0, 17.5, 20.0]  # every 5 steps of the 20-step hold after the 20-step ramp
    assert frames[0].info["reason"].startswith("calibration: frame 0 of the final model's MD at 300 K")

    final, calibrated = (load_model(tmp_path / name) for name in ("final/model.ckpt", "confirm1/calibrated.ckpt"))
    factors = records[0]["calibration"]
    for name in ("energy", "force"):
        scale = getattr(final, f"{name}_uncertainty_scale") * factors[f"{name}_scale_factor"]
        torch.testing.assert_close(getattr(calibrated, f"{name}_uncertainty_scale"), scale)
    report = calibration_report(SciMLCalculator.from_checkpoint(tmp_path / "confirm1" / "calibrated.ckpt"), frames)
    rms = [np.sqrt(np.mean(values**2)) for values in (report.component_error, report.component_uncertainty)]
    np.testing.assert_allclose(rms[0], rms[1], rtol=1e-5)  # fitted on these frames
    assert written.read_bytes() == (tmp_path / "confirm2" / "calibrated.ckpt").read_bytes()
    assert any("uncertainty calibrated on 4 frames" in line for line in lines)

    again = CountingOracle()  # resuming samples, labels and refits nothing
    ActiveLearning(tmp_path, again, settings, report=lambda line: None).run(WATER)
    assert again.calls == 0 and json.loads((tmp_path / "state.json").read_text())["confirmations"] == records
    with pytest.raises(ValueError, match="calibration_frames must be 0"):
        LearningSettings(calibration_frames=1)


def test_a_committee_is_calibrated_on_its_own_md_as_the_single_model_is(tmp_path):
    """The calibration refits a committee's two scales by the same rule (RMS sigma = RMS error over the frames)."""
    from sciml.uncertainty import Committee

    settings = tiny_settings(1, "committee", confirmations=1, calibration_frames=4)
    ActiveLearning(tmp_path, CountingOracle(), settings, report=lambda line: None).run(WATER)
    factors = json.loads((tmp_path / "state.json").read_text())["confirmations"][0]["calibration"]
    final, calibrated = (load_model(tmp_path / name) for name in ("final/model.ckpt", "confirm1/calibrated.ckpt"))
    assert isinstance(calibrated, Committee) and factors["frames"] == 4
    for name in ("energy", "force"):
        scale = getattr(final, f"{name}_uncertainty_scale") * factors[f"{name}_scale_factor"]
        torch.testing.assert_close(getattr(calibrated, f"{name}_uncertainty_scale"), scale)
    frames = [frame for frame in ase.io.read(tmp_path / "labelled.extxyz", index=":")
              if frame.info["key"].startswith("final1-confirm1-calibration")]  # fmt: skip
    report = calibration_report(SciMLCalculator.from_checkpoint(tmp_path / "confirm1" / "calibrated.ckpt"), frames)
    rms = [np.sqrt(np.mean(values**2)) for values in (report.component_error, report.component_uncertainty)]
    np.testing.assert_allclose(rms[0], rms[1], rtol=1e-5)


def test_rounds_calibration_and_confirmation_explore_with_replicas_in_one_batch(tmp_path):
    """With ``replicas`` 2 a round's first batch is two runs (both whole here: the round has them both), the
    picks are spaced per run and keyed by run, and the calibration frames are shared between the replicas."""
    settings = tiny_settings(1, "last-layer", confirmations=1, calibration_frames=4)
    settings.exploration.replicas, settings.exploration.cap = 2, 4
    lines = []
    ActiveLearning(tmp_path, CountingOracle(), settings, report=lines.append).run(WATER)
    state = json.loads((tmp_path / "state.json").read_text())
    round1 = state["rounds"][0]
    assert round1["runs"] == 2 and round1["md_steps"] == 2 * 40 and round1["picked"] == 4
    assert any("up to 80 MD steps in batches of 2 replicas" in line for line in lines)
    labelled = ase.io.read(tmp_path / "labelled.extxyz", index=":")
    picks = [frame.info["key"] for frame in labelled if frame.info["key"].startswith("round1-")]
    assert len(picks) == 4 and all(re.fullmatch(r"round1-run[01]-step\d+", key) for key in picks)
    steps = {run: [int(key.split("step")[1]) for key in picks if f"-run{run}-" in key] for run in (0, 1)}
    for run_steps in steps.values():  # 2 fs = 4 steps apart within a run
        assert all(b - a >= 4 for a, b in zip(run_steps, run_steps[1:], strict=False))
    calibration = ase.io.read(tmp_path / "confirm1" / "calibration.extxyz", index=":")
    assert [frame.info["replica"] for frame in calibration] == [0, 0, 1, 1]
    assert state["confirmations"][0]["calibration"]["frames"] == 4 and state["confirmations"][0]["runs"] == 2


def test_more_than_one_conformer_needs_a_smiles_start(capsys):
    assert learn.parse(["--smiles", "CCO", "--conformers", "3"]).conformers == 3
    with pytest.raises(SystemExit):
        learn.parse(["--structure", "start.xyz", "--conformers", "3"])
    assert "more than 1 only with --smiles" in capsys.readouterr().err


def test_the_run_state_round_trips_through_its_file_and_refuses_another_run_or_an_unknown_key(tmp_path):
    from sciml.active.state import RunState

    path = tmp_path / "state.json"
    state = RunState.load(path, "smiles:O", "GFN2-xTB")
    assert not path.exists() and state.seconds == {"oracle": 0.0, "training": 0.0, "md": 0.0}
    state.round_record(2).md_steps = 40
    state.timed("md", lambda: None)
    assert json.loads(path.read_text())["rounds"] == [{"round": 1}, {"round": 2, "md_steps": 40}]
    again = RunState.load(path, "smiles:O", "GFN2-xTB")
    assert again.rounds == state.rounds and again.seconds["md"] > 0 and again.confirmed is None
    with pytest.raises(ValueError, match="holds a run with source 'smiles:O', not 'smiles:CC'"):
        RunState.load(path, "smiles:CC", "GFN2-xTB")
    path.write_text(json.dumps({**json.loads(path.read_text()), "colour": "blue"}))
    with pytest.raises(ValueError, match=r"state.json' has keys this sciml does not know: \['colour'\]"):
        RunState.load(path, "smiles:O", "GFN2-xTB")
    path.write_text(json.dumps({"source": "smiles:O", "oracle": "GFN2-xTB", "rounds": [{"round": 1, "steps": 3}]}))
    with pytest.raises(
        ValueError, match=r"a round or confirmation record with keys this sciml does not know: \['steps'\]"
    ):
        RunState.load(path, "smiles:O", "GFN2-xTB")


def test_a_confirmation_loads_the_final_model_once_for_its_calibration_and_run(tmp_path):
    """The parts share the model in memory: the calibration's MD, its refit and the confirmation run read each
    checkpoint once (the final model was read four times before), through the explorer passed in."""
    from sciml.active import explore
    from sciml.calculators.checkpoint import CheckpointModels, load_model

    read, explored = [], []

    def loader(path):
        read.append(Path(path).relative_to(tmp_path).as_posix())
        return load_model(path)

    def explorer(starts, model, settings, seed, on_step, **options):
        explored.append(model)
        return explore(starts, model, settings, seed, on_step, **options)

    settings = tiny_settings(1, "last-layer", confirmations=1, calibration_frames=2)
    ActiveLearning(tmp_path, CountingOracle(), settings, report=lambda line: None, explorer=explorer,
                   models=CheckpointModels(loader)).run(WATER)  # fmt: skip
    assert len(read) == len(set(read)) and {"final/model.ckpt", "confirm1/calibrated.ckpt"} <= set(read)
    assert read[:2] == ["round1/model.ckpt", "final/model.ckpt"]
    # round 1's runs, the final model's calibration MD, its confirmation run: only models the cache read
    assert len(explored) >= 3 and len({id(model) for model in explored}) <= len(read)


def test_the_planner_and_labeller_are_parts_the_loop_is_given(tmp_path):
    """A planner that allows one round ends the exploration there; a labeller that counts sees every frame."""
    from sciml.active.budget import Planner
    from sciml.active.labelling import Labeller

    class OneRound(Planner):
        def round_fits(self, round: int, starts: int) -> bool:
            return round == 1

    labelled = []

    class Counting(Labeller):
        def label_one(self, pick, round):
            labelled.append(pick.key)
            super().label_one(pick, round)

    loop = ActiveLearning(tmp_path, CountingOracle(), tiny_settings(rounds=3), report=lambda line: None,
                          planner=OneRound, labeller=Counting)  # fmt: skip
    loop.run(WATER)
    assert len(loop.state.rounds) == 1 and not (tmp_path / "round2").exists()
    assert len(labelled) == 8 + 3 and labelled[:2] == ["seed-0", "seed-1"]
