"""The on-the-fly learning loop behind ``sciml learn``.

Round 0 labels a seed set (rattled copies of the start structure, or the frames of a given dataset). There
may be several start structures (conformers: :func:`~sciml.active.structures.conformers_from_smiles`); the
rattled copies are then shared among them. Every round r >= 1 then

1. trains on everything labelled so far (:func:`~sciml.active.training.train_round`), from round r - 1's
   weights;
2. explores: ramped ML Langevin MD with that model (:func:`~sciml.active.exploration.explore`); a run that
   ends early (a young model soon leaves what it knows) is followed by new ones with other velocities until
   the round has ``cap`` frames or has used the steps of one full run per start. With several starts the runs
   take them in turn (round r begins with start r - 1, modulo their number), and a full run ends the round
   only once every start has had a run. The runs go in batches of ``replicas`` R (default 1), advanced together
   by the MD engine in one batched model call per step: the batch's picks are spaced within each run, and the
   round converges when its first batches (every start has had a run) stayed whole at or below the threshold;
3. stops when one run from every start stayed whole at or below the threshold (converged), else labels the frames
   :func:`~sciml.active.exploration.select_frames` picks, each with its round, uncertainty and reason
   (:class:`~sciml.active.store.LabelStore`), and goes on to round r + 1 (at most ``rounds``).

When the loop ends (converged, or after ``rounds``), the last round's model trains ``final_epochs`` more on
everything labelled (DP-GEN's final training), with its uncertainty fitted again. That final model is the one
written, so it is the one checked (when there were exploration rounds): a confirmation run from every start
(the ramp, then ``confirm_hold_ps`` at the target, longer than a round's hold) must stay at or below
``confirm_level`` times the threshold (DP-GEN's second, stricter trust level: the largest uncertainty over a
run grows with its length, and the model will run far longer than its confirmation); otherwise the frames it
picked above that level are labelled and the model trains ``epochs_per_round`` more, then runs again (at most
``confirmations`` retrainings). Before each confirmation run the model's uncertainty scales are refitted on
``calibration_frames`` labelled frames of its own MD at the target (:mod:`sciml.active.calibration`): the
validation split that fitted them holds the loop's picks, not the frames the model will meet. ``state.json``
records each confirmation, its calibration and whether the written model was ``confirmed``. With a time budget
(:mod:`sciml.active.budget`) a round starts only if it and the final stage fit in the time left; the final
training's epochs are fitted to what is left.

The run directory holds the store, ``round<r>/model.ckpt`` and ``round<r>/candidates.extxyz`` (the frames
picked for the oracle, written before it is called), ``state.json`` (each round's figures and the time spent
in the oracle, training and MD), ``final/model.ckpt``, ``confirm<k>/`` (the frames that calibrated the model
and its calibrated copy, the confirmation's picks and the model retrained after it) and, at the end, the
written model's copy ``model.ckpt``. Starting again in the same directory resumes: frames already sent to
the oracle are never sent again, a trained model is not retrained, picked candidates are labelled without a
new exploration. An oracle failure is recorded in the store and skipped.
"""

from __future__ import annotations

import hashlib
import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ase import Atoms

from sciml.active.budget import Planner, runs_per_round
from sciml.active.calibration import calibrated_checkpoint, sample_frames
from sciml.active.exploration import ExplorationSettings, explore, select_frames, shares
from sciml.active.labelling import Labeller
from sciml.active.oracles import Oracle
from sciml.active.picks import Pick, candidate_pick, labelled_copy, read_picks, write_picks
from sciml.active.state import RunState, StageRecord
from sciml.active.store import LabelStore
from sciml.active.structures import rattled_copies
from sciml.active.training import TrainingSettings, train_round
from sciml.calculators.checkpoint import CheckpointModels
from sciml.md import start_structures


@dataclass
class LearningSettings:
    """``rounds``: the most exploration rounds; ``seed_frames`` rattled copies (``seed_displacement`` Å at
    most) label the start; ``source`` names the start (a SMILES string, a file) and must match on resuming;
    ``confirmations``: how often the final model may be retrained after a confirmation run (the exploration's
    ramp, then ``confirm_hold_ps`` at the target) that went above ``confirm_level`` times the threshold (0, or
    ``rounds`` 0: no confirmation run); ``confirm_level`` 0.8, DP-GEN's stricter second level (why this
    value: a long run's largest uncertainty against its confirmation run's, ``docs/benchmarks/earlier.md``).
    ``calibration_frames``: before each confirmation run, that many frames of the model's own MD at the target
    are labelled and its uncertainty scales refitted on them (:mod:`sciml.active.calibration`; 0: the
    validation split's scales). ``time_budget_min``: the minutes (the phase clocks' sum) in which the loop
    plans to write its final model, calibrated and confirmed (:mod:`sciml.active.budget`; None: no budget)."""

    exploration: ExplorationSettings = field(default_factory=ExplorationSettings)
    training: TrainingSettings = field(default_factory=TrainingSettings)
    rounds: int = 10
    seed_frames: int = 32
    seed_displacement: float = 0.1
    seed: int = 0
    source: str = ""
    confirmations: int = 2
    confirm_hold_ps: float = 10.0
    confirm_level: float = 0.8
    calibration_frames: int = 50
    time_budget_min: float | None = None

    def __post_init__(self) -> None:
        if self.time_budget_min is not None and not self.time_budget_min > 0:
            raise ValueError(f"time_budget_min must be positive minutes (None: no budget), got {self.time_budget_min}")
        if self.confirmations < 0 or not self.confirm_hold_ps > 0 or not 0 < self.confirm_level <= 1:
            raise ValueError(f"confirmations must be >= 0, confirm_hold_ps > 0 and 0 < confirm_level <= 1, got "
                             f"{self.confirmations}, {self.confirm_hold_ps} and {self.confirm_level}")  # fmt: skip
        if self.calibration_frames == 1 or self.calibration_frames < 0:
            raise ValueError(f"calibration_frames must be 0 (none) or at least 2, got {self.calibration_frames}")


class ActiveLearning:
    """The loop of the module docstring in ``directory`` with ``oracle``; ``report`` receives progress lines.

    Its parts are passed in (defaults: the real ones): ``explorer(starts, model, settings, seed, on_step,
    **options)`` runs a batch of exploration runs, one per start (:func:`~sciml.active.exploration.explore`);
    ``trainer(frames, directory, settings, round, previous, epochs=None, max_seconds=None)`` trains a round's
    model on the store's labelled frames (in memory), continuing ``previous`` (the last model, in memory, or
    ``None``), into ``directory`` (:func:`~sciml.active.training.train_round`); ``models`` loads trained
    checkpoints once (:class:`~sciml.calculators.checkpoint.CheckpointModels`); ``labeller(oracle, store,
    state, report)`` and ``planner(settings, state, store, report)`` build the parts that label frames
    (:class:`~sciml.active.labelling.Labeller`) and take the time budget's decisions
    (:class:`~sciml.active.budget.Planner`) on the run's own store and state
    (:class:`~sciml.active.state.RunState`, read from the directory).
    """

    def __init__(
        self,
        directory: str | Path,
        oracle: Oracle,
        settings: LearningSettings,
        report: Callable[[str], None] = print,
        on_md_step: Callable[[int, float], None] | None = None,
        explorer: Callable[..., list] = explore,
        trainer: Callable[..., Path] = train_round,
        models: CheckpointModels | None = None,
        labeller: Callable[..., Labeller] = Labeller,
        planner: Callable[..., Planner] = Planner,
    ) -> None:
        self.directory, self.oracle, self.settings, self.report = Path(directory), oracle, settings, report
        self.on_md_step, self.explorer, self.trainer = on_md_step, explorer, trainer
        self.models = models or CheckpointModels()
        self.store = LabelStore(self.directory)
        self.state = RunState.load(self.directory / "state.json", settings.source, oracle.name)
        self.labeller = labeller(oracle, self.store, self.state, report)
        self.planner = planner(settings, self.state, self.store, report)

    # --- the loop ----------------------------------------------------------------------------------------
    def run(
        self,
        start: Atoms | Sequence[Atoms],
        dataset: list[Atoms] | None = None,
        seeds: Sequence[Atoms] | None = None,
        initial: Path | None = None,
    ) -> Path:
        """Learn from ``start`` (the MD start structure, or several of the same atoms: conformers); returns the
        final model checkpoint. The seed set is the labelled ``dataset``, or ``seeds`` (frames the oracle
        labels, e.g. chosen from a cheaper level's run), or else rattled copies of the starts. ``initial``: a
        model checkpoint the first training continues from (``training.epochs`` of it: fine-tuning, e.g. a
        GFN2-xTB model on DFT labels), instead of a new model."""
        if dataset is not None and seeds is not None:
            raise ValueError("give a labelled dataset or seed frames to label, not both")
        if self.settings.rounds < 0:
            raise ValueError(f"rounds is {self.settings.rounds}: give 0 (train on the seed set only) or more")
        if self.settings.rounds == 0 and not self.settings.training.final_epochs:
            raise ValueError("rounds 0 and final_epochs 0 train no model: give rounds >= 1 or final_epochs >= 1")
        starts = start_structures(start)
        self._seed(starts, dataset, seeds)
        previous, state = initial, self.state
        for round in range(1, self.settings.rounds + 1):
            checkpoint = self.directory / f"round{round}" / "model.ckpt"
            if round > 1 and not checkpoint.exists() and not self.planner.round_fits(round, len(starts)):
                break
            record = state.round_record(round)
            if not checkpoint.exists():
                self.report(f"round {round}: training on {len(self.store.labelled)} labelled frames")
                epochs = self.settings.training.epochs if round == 1 else None  # a fine-tuning: as round 1
                state.timed("training", self.trainer, self.store.labelled, checkpoint.parent,
                            self.settings.training, round, previous and self.models(previous), epochs)  # fmt: skip
            previous = checkpoint
            if record.frames_trained is None:
                record.frames_trained = len(self.store.labelled)
            candidates = self._candidates(round, record, starts, checkpoint)
            if record.below_threshold:
                state.converged = True
                state.save()
                self._progress(round, "converged: the whole run stayed below the threshold")
                break
            self.labeller.label(candidates, round)
            record.labelled = self.labeller.labelled_in(round)
            state.save()
            self._progress(round, f"labelled {record.labelled} of {len(candidates)} picked")
        else:
            if self.settings.rounds:
                self.report(f"not converged after {self.settings.rounds} rounds (more --rounds continue the run)")
            else:
                self.report(f"no exploration rounds: the final model trains on the {len(self.store.labelled)} "
                            "seed frames")  # fmt: skip
        final = self.directory / "final" / "model.ckpt"
        epochs = self.settings.training.final_epochs
        origin = f"{previous}, {epochs} epochs"  # another last round or final_epochs: trained anew
        if epochs and not (final.exists() and state.final_from == origin):
            seconds = self.planner.final_seconds(len(starts))
            within = f" (fitted to {seconds / 60:.1f} min of the time budget)" if seconds else ""
            self.report(f"final model: {epochs} epochs on {len(self.store.labelled)} frames{within}")
            state.timed("training", self.trainer, self.store.labelled, final.parent, self.settings.training,
                        self.settings.rounds + 1, previous and self.models(previous), epochs, seconds)  # fmt: skip
            state.final_from = origin
            state.save()
        confirmed = self._confirm(final if epochs else previous, starts)
        model = self.directory / "model.ckpt"
        shutil.copyfile(confirmed, model)
        self.report(f"wrote {model} and the store {self.store.labelled_path}")
        return model

    def _confirm(self, model: Path, starts: list[Atoms]) -> Path:
        """Run the model that will be written, the final one, through a confirmation run from every start (the
        ramp, then ``confirm_hold_ps`` at the target): the rounds checked their own models, not this one, and
        over a shorter hold. Above ``confirm_level`` times the threshold, the frames it picked are labelled
        (their round: the last round + k) and the model trains ``epochs_per_round`` more on everything, at most
        ``confirmations`` times. Returns the last model; ``state.confirmed`` says whether its run stayed at or
        below that level."""
        if not self.settings.confirmations or not self.settings.rounds:  # no exploration asked for: none here
            return model
        state, exploration, hold = self.state, self.settings.exploration, self.settings.confirm_hold_ps
        settings = replace(
            exploration,
            hold_ps=hold,
            threshold=self.settings.confirm_level * exploration.threshold,
            uncertainty_bias=0.0,
        )  # the final model's own MD, unbiased
        rounds = len(state.rounds)
        digest = hashlib.sha256(model.read_bytes()).hexdigest()[:16]
        origin = f"{model} (sha256 {digest}) after round {rounds}, {hold:g} ps at or below {settings.threshold:g} eV/Å"
        if state.confirmations_of != origin:  # a new final model or level: confirmed anew
            for old in self.directory.glob("confirm[0-9]*"):
                shutil.rmtree(old)
            state.confirmations_of, state.confirmations, state.confirmed = origin, [], False
        level = f"{self.settings.confirm_level:g} x the threshold ({settings.threshold:.3f} eV/Å)"
        note = f" (confirmation of the final model, at {self.settings.confirm_level:g} x the threshold)"
        for k in range(1, self.settings.confirmations + 2):
            record, directory = state.confirmation_record(k), self.directory / f"confirm{k}"
            if self.settings.calibration_frames:
                model = self._calibrate(model, directory, rounds + k, starts, record)
            record.model = str(model)
            frames = self._candidates(rounds + k, record, starts, model, settings, directory,
                                      f"final{rounds}-confirm{k}", note)  # fmt: skip
            largest = record.max_uncertainty
            if record.below_threshold:
                state.confirmed = True
                state.save()
                self.report(f"final model confirmed: {hold:g} ps at {settings.temperature:g} K stayed at or below "
                            f"{level} (largest uncertainty {largest:.3f} eV/Å)")  # fmt: skip
                return model
            if k > self.settings.confirmations:
                self.report(
                    f"final model not confirmed after {self.settings.confirmations} retrainings (largest "
                    f"uncertainty {largest:.3f} eV/Å): more --confirmations or --rounds continue the run"
                )
                return model
            self.labeller.label(frames, rounds + k)
            calibration = record.calibration["frames"] if record.calibration else 0
            record.labelled = self.labeller.labelled_in(rounds + k) - calibration  # failures left out
            state.save()
            retrained = directory / "model.ckpt"
            if not retrained.exists() and not self.planner.retraining_fits(len(starts)):
                self.report(f"final model not confirmed (largest uncertainty {largest:.3f} eV/Å): its retraining "
                            "and a new confirmation run would not fit in the time budget")  # fmt: skip
                return model
            if not retrained.exists():
                self.report(
                    f"final model: confirmation {k} went to {largest:.3f} eV/Å, above {level}; labelled "
                    f"{len(frames)}, training {self.settings.training.epochs_per_round} epochs on "
                    f"{len(self.store.labelled)}"
                )
                state.timed("training", self.trainer, self.store.labelled, directory, self.settings.training,
                            self.settings.rounds + 1 + k, self.models(model))  # fmt: skip
            model = retrained
        return model

    def _calibrate(self, model: Path, directory: Path, round: int, starts: list[Atoms], record: dict) -> Path:
        """``model`` with its uncertainty scales refitted on ``calibration_frames`` frames of its own MD at the
        target (:mod:`sciml.active.calibration`), as ``<directory>/calibrated.ckpt``. The frames (written to
        ``calibration.extxyz`` before the oracle sees them) are labelled with round ``round`` and stay in the
        store; ``record.calibration`` has their number and the two factors. The model is loaded once."""
        calibrated, path = directory / "calibrated.ckpt", directory / "calibration.extxyz"
        if calibrated.exists() and record.calibration is not None:
            return calibrated
        directory.mkdir(parents=True, exist_ok=True)
        state, exploration = self.state, self.settings.exploration
        if path.exists():
            picks = read_picks(path)
        else:
            count = self.settings.calibration_frames
            self.report(f"final model: {count} frames of its own MD at {exploration.temperature:g} K to calibrate "
                        "its uncertainty")  # fmt: skip
            unbiased = replace(exploration, uncertainty_bias=0.0)
            frames = state.timed("md", sample_frames, self.models(model), starts, unbiased, count,
                                 self.settings.seed + 1000 * round + 500, self.on_md_step, self.explorer)  # fmt: skip
            picks = [Pick(f"final{len(state.rounds)}-{directory.name}-calibration{index}", frame,
                          frame.info["uncertainty"], f"calibration: frame {index} of the final model's MD at "
                          f"{exploration.temperature:g} K (uniform in time, {frame.info['time_fs']:g} fs)")
                     for index, frame in enumerate(frames)]  # fmt: skip
            write_picks(path, picks)
        self.labeller.label(picks, round)
        labelled = self.store.labelled_with(pick.key for pick in picks)
        if len(labelled) < 2:
            self.report(f"final model: {len(labelled)} calibration frames labelled, too few to refit; the "
                        "validation split's scales stay")  # fmt: skip
            record.calibration = {"frames": len(labelled), "energy_scale_factor": 1.0, "force_scale_factor": 1.0}
            state.save()
            return model
        check = state.timed("training", calibrated_checkpoint, self.models(model), labelled, calibrated)
        record.calibration = {key: check[key] for key in ("frames", "energy_scale_factor", "force_scale_factor")}
        state.save()
        self.report(
            f"final model: uncertainty calibrated on {len(labelled)} frames of its MD at "
            f"{exploration.temperature:g} K (force scale x {check['force_scale_factor']:.2f}, energy x "
            f"{check['energy_scale_factor']:.2f})"
        )
        return calibrated

    def _seed(self, starts: list[Atoms], dataset: list[Atoms] | None, seeds: Sequence[Atoms] | None) -> None:
        if seeds is not None:
            given = [Pick(f"seed-frame{k}", atoms, math.nan, f"seed: given frame {k}") for k, atoms in enumerate(seeds)]
            self.labeller.label(given, 0)  # those the store holds are skipped
            return
        if dataset is not None:
            for index, frame in enumerate(dataset):
                if f"dataset-{index}" not in self.store.keys:
                    copy_ = labelled_copy(frame, index)
                    self.store.add(copy_, Pick(f"dataset-{index}", copy_, math.nan, "given dataset"), 0, "dataset")
            return
        pending = []
        counts = shares(self.settings.seed_frames, len(starts))  # the first starts take the remainder
        for index, (start, count) in enumerate(zip(starts, counts, strict=True)):
            copies = rattled_copies(start, count, self.settings.seed_displacement, self.settings.seed + index)
            prefix = f"seed-start{index}" if index else "seed"  # start 0's keys as in a run with one start
            reason = "seed: rattled start structure" + (f" {index}" if index else "")
            pending += [Pick(f"{prefix}-{k}", atoms, math.nan, reason) for k, atoms in enumerate(copies)]
        pending = [pick for pick in pending if pick.key not in self.store.keys]
        self.labeller.label(pending, 0)
        if pending:
            self._progress(0, f"seed set labelled ({len(self.store.labelled)} frames)")

    def _candidates(
        self,
        round: int,
        record: StageRecord,
        starts: list[Atoms],
        checkpoint: Path,
        settings: ExplorationSettings | None = None,
        directory: Path | None = None,
        prefix: str = "",
        note: str = "",
    ) -> list[Pick]:
        """The frames round ``round`` picked (read back when its exploration already ran): exploration runs with
        ``checkpoint``'s model and ``settings`` (default the loop's), the picks in ``directory`` (default the
        checkpoint's) under keys ``<prefix>-run<r>-step<s>`` (default prefix ``round<round>``), ``note`` ending
        their reasons."""
        directory = directory or checkpoint.parent
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "candidates.extxyz"
        if record.explored and path.exists():
            return read_picks(path)
        if record.explored:  # converged before: nothing picked
            return []
        settings = settings or self.settings.exploration
        n, batch = len(starts), settings.replicas
        needed = runs_per_round(n, batch)  # runs of the round's first batches: every start has had one
        budget = settings.steps * needed
        name = f"round {round}" if not prefix else f"{prefix} (final model)"
        self.report(f"{name}: exploring (up to {budget} MD steps" + (f" from {n} starts" if n > 1 else "")
                    + (f" in batches of {batch} replicas)" if batch > 1 else ")"))  # fmt: skip
        model = self.models(checkpoint)  # in memory for every batch of the round
        runs, picks = [], []
        while True:  # runs that end early are followed by new ones (other velocities) until the cap or budget
            seed = self.settings.seed + 1000 * round + len(runs)
            origins = [(round - 1 + len(runs) + r) % n for r in range(batch)]
            batch_starts = [starts[origin] for origin in origins]
            found = self.state.timed("md", self.explorer, batch_starts, model, settings, seed, self.on_md_step)
            pool = [candidate for run in found for candidate in run.candidates]
            picked = select_frames(pool, settings.cap - len(picks), settings.spacing_fs)
            last = {id(run.candidates[-1]) for run in found if run.stopped and not run.broken and run.candidates}
            picks += [candidate_pick(candidate, prefix or f"round{round}", len(runs) + candidate.run,
                                        id(candidate) in last, origins[candidate.run] if n > 1 else None, note)
                       for candidate in picked]  # fmt: skip
            runs += found
            whole = not any(run.stopped for run in found) and len(runs) >= needed  # full runs, every start had one
            if whole or len(picks) >= settings.cap or sum(r.steps for r in runs) >= budget:
                break
        write_picks(path, picks)
        record.md_steps, record.runs = sum(r.steps for r in runs), len(runs)
        record.max_uncertainty = max(r.max_uncertainty for r in runs)
        record.stopped, record.broken = sum(r.stopped for r in runs), sum(r.broken for r in runs)
        record.candidates, record.picked = sum(len(r.candidates) for r in runs), len(picks)
        record.below_threshold = len(runs) == needed and all(r.below_threshold for r in runs)
        self.state.save()
        return picks

    def _progress(self, round: int, event: str) -> None:
        seconds = self.state.seconds
        largest = self.state.rounds[round - 1].max_uncertainty if round else None
        largest = math.nan if largest is None else largest
        self.report(
            f"round {round} | {event} | labelled {len(self.store.labelled)}, failed {len(self.store.failed)} | "
            f"largest uncertainty {largest:.3f} eV/Å (threshold {self.settings.exploration.threshold}) | "
            f"oracle {seconds['oracle']:.0f} s, training {seconds['training']:.0f} s, MD {seconds['md']:.0f} s"
        )

    def summary(self) -> dict:
        """The run's figures: rounds, frames labelled and failed, convergence, seconds per phase, settings."""
        state = self.state
        return {
            "rounds": [record.as_json() for record in state.rounds],
            "labelled": len(self.store.labelled),
            "failed": len(self.store.failed),
            "oracle_calls": len(self.store.labelled) + len(self.store.failed),
            "converged": state.converged,
            "confirmations": [record.as_json() for record in state.confirmations],
            "confirmed": state.confirmed,
            "budget_ended_after": state.budget_ended_after,
            "seconds": state.seconds,
            "settings": asdict(self.settings),
        }
