"""The expensive level as a difference to the cheap one, distilled into one model (``sciml learn --pretrain
gfn2-xtb --transfer difference``).

Once the cheap level (:mod:`sciml.active.two_level`, level 1) has learned where the molecule goes:

1. **The pool**: ``pool_frames`` frames of the cheap-level model's Langevin MD at the target temperature (the
   exploration's ramp, then a hold long enough for a frame every ``pool_spacing_fs`` per run;
   :func:`~sciml.active.calibration.sample_frames`), each labelled by the cheap oracle (milliseconds a frame),
   in ``pool.extxyz``.
2. **The difference where it is uncertain**: the expensive oracle labels ``seed_frames`` pool frames spread over
   their shapes (:func:`~sciml.active.picks.spread_frames`). Each round then trains a model of expensive -
   cheap (energy eV, forces eV/Å) on every pool frame labelled so far, continuing the last round's
   (``round<r>/model.ckpt``), evaluates its largest per-atom force uncertainty on every pool frame, and sends the
   ``cap`` most uncertain ones above ``threshold`` (no two of one MD run within ``spacing_fs``) to the expensive
   oracle. It stops when no pool frame is above ``threshold``, after ``rounds``, or when the time budget calls for
   the final stage. The difference is smaller and smoother than the expensive level's surface itself, so it
   takes fewer expensive labels to learn (what that buys is measured by ``scripts/bench_dft.py``'s routes).
3. **Distillation**: a difference model of the final size learns every expensive label
   (``difference/model.ckpt``, ``difference_share`` of the final stage's time); then the final model
   (``final_preset``, a new model trained for ``final_epochs`` or the time left) learns every pool frame, with the
   expensive labels where the oracle gave them and cheap + difference elsewhere (``distilled.extxyz``). Its MD
   needs nothing but itself: the difference model alone would need a cheap-oracle call at every step.
4. **Calibration and a held-out check**: ``calibration_frames`` frames of the final model's own MD at the target,
   labelled by the expensive oracle, refit its uncertainty scales (:mod:`sciml.active.calibration`) and give its
   error against the expensive level on frames it never trained on (``final/check.json``).
5. **The composite**: the difference model under the cheap method itself (``composite.ckpt``, a checkpoint that
   names the method: :mod:`sciml.calculators.baseline`), its uncertainty refitted on the same frames
   (``difference/check.json``). No distillation error, at the price of a cheap-oracle call every MD step
   (GFN2-xTB: about 1 ms for ethanol), and only through the ASE calculator (the replica driver and the exports
   run a model alone).

Everything resumes: the pool, each round's model and picks (written before the oracle sees them), the store of
expensive labels (``labelled.extxyz``) and the final model are read back, never recomputed.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import ase.io
import numpy as np
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.active.calibration import calibrated_checkpoint, sample_frames
from sciml.active.exploration import ExplorationSettings, explore
from sciml.active.labelling import Labeller
from sciml.active.oracles import Oracle, OracleFailure
from sciml.active.picks import Pick, read_picks, spread_frames, write_picks
from sciml.active.state import RunState
from sciml.active.store import LabelStore
from sciml.active.training import TrainingSettings, train_round
from sciml.calculators.baseline import write_baseline
from sciml.calculators.checkpoint import CheckpointModels

POOL_ATTEMPTS = 4  # batches of MD runs that may fill the pool


@dataclass
class DifferenceSettings:
    """``pool_frames`` and ``pool_spacing_fs`` (fs between a run's pool frames); ``seed_frames``, ``cap`` and
    ``rounds`` count expensive labels and rounds; ``threshold``: the difference model's largest per-atom force
    uncertainty (eV/Å) below which no pool frame is labelled; ``spacing_fs``: two picks of one MD run at least this
    far apart; ``final_preset``, ``final_epochs`` and ``final_learning_rate``: the distilled model's size and
    training (the library's defaults: ``"medium"``, 1e-2); ``difference_epochs``: the final difference model's
    (that size, on every expensive label; 0: the last round's model labels the pool), ``difference_share``: its
    part of the final stage's time; ``final_share``: the part of ``time_budget_min`` kept
    for the final training (the rounds end before they would eat into it); ``calibration_frames``: expensive labels
    of the final model's MD (0: none; then no held-out check)."""

    exploration: ExplorationSettings = field(default_factory=ExplorationSettings)
    training: TrainingSettings = field(default_factory=TrainingSettings)
    pool_frames: int = 1000
    pool_spacing_fs: float = 20.0
    seed_frames: int = 32
    cap: int = 16
    rounds: int = 3
    threshold: float = 0.02
    spacing_fs: float = 50.0
    final_preset: str = "medium"
    difference_epochs: int = 300
    difference_share: float = 0.3
    final_epochs: int = 200
    final_learning_rate: float = 1e-2
    final_share: float = 0.5
    calibration_frames: int = 20
    time_budget_min: float | None = None
    seed: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        if self.pool_frames < 2 or self.seed_frames < 2 or self.cap < 1 or self.rounds < 0:
            raise ValueError(f"pool_frames and seed_frames must be >= 2, cap >= 1 and rounds >= 0, got "
                             f"{self.pool_frames}, {self.seed_frames}, {self.cap} and {self.rounds}")  # fmt: skip
        if not 0 < self.final_share < 1 or not 0 < self.difference_share < 1 or not self.threshold > 0:
            raise ValueError(f"final_share and difference_share must be in (0, 1) and threshold > 0, got "
                             f"{self.final_share}, {self.difference_share} and {self.threshold}")  # fmt: skip
        if self.calibration_frames == 1 or self.calibration_frames < 0:
            raise ValueError(f"calibration_frames must be 0 (none) or at least 2, got {self.calibration_frames}")


class DifferenceLevel:
    """The level of the module docstring in ``directory``: ``cheap`` labels the pool, ``expensive`` the picks
    (through ``labeller(oracle, store, state, report)``, :class:`~sciml.active.labelling.Labeller`); ``trainer`` and
    ``explorer`` as in :class:`~sciml.active.loop.ActiveLearning`."""

    def __init__(
        self,
        directory: str | Path,
        cheap: Oracle,
        expensive: Oracle,
        settings: DifferenceSettings,
        report: Callable[[str], None] = print,
        on_md_step: Callable[[int, float], None] | None = None,
        labeller: Callable[..., Labeller] = Labeller,
        trainer: Callable[..., Path] = train_round,
        explorer: Callable[..., list] = explore,
    ) -> None:
        self.directory, self.cheap, self.oracle, self.settings = Path(directory), cheap, expensive, settings
        self.report, self.on_md_step, self.trainer, self.explorer = report, on_md_step, trainer, explorer
        self.models = CheckpointModels()
        self.store = LabelStore(self.directory)
        self.state = RunState.load(self.directory / "state.json", settings.source, expensive.name)
        self.labeller = labeller(expensive, self.store, self.state, report)

    def run(self, starts: Sequence[Atoms], pretrained: Path) -> Path:
        """Learn the difference from the cheap level's model ``pretrained`` (its MD from ``starts``), distil it;
        returns the written model (``<directory>/model.ckpt``)."""
        pool = self._pool(list(starts), pretrained)
        seeds = spread_frames(pool, self.settings.seed_frames)
        self.labeller.label([self._pick(pool, index, math.nan, "seed: spread over the pool") for index in seeds], 0)
        previous = None
        for round in range(1, self.settings.rounds + 1):
            record = self.state.round_record(round)
            checkpoint = self.directory / f"round{round}" / "model.ckpt"
            if not checkpoint.exists() and round > 1 and not self._round_fits():
                self.report(f"time budget: the difference's rounds end after round {round - 1}")
                break
            if not checkpoint.exists():
                differences = self._differences(pool)
                self.report(f"round {round}: the difference model on {len(differences)} labelled frames")
                self.state.timed("training", self.trainer, differences, checkpoint.parent, self.settings.training,
                                 round, previous and self.models(previous))  # fmt: skip
                record.frames_trained = len(differences)
            previous = checkpoint
            picks = self._picks(round, record, pool, checkpoint)
            if not picks:
                self.state.converged = True
                self.state.save()
                self.report(f"round {round}: no pool frame above {self.settings.threshold} eV/Å: converged")
                break
            self.labeller.label(picks, round)
            record.labelled = self.labeller.labelled_in(round)
            self.state.save()
            self.report(f"round {round}: labelled {record.labelled} of {len(picks)} picked (largest uncertainty "
                        f"{record.max_uncertainty:.3f} eV/Å); {len(self.store.labelled)} expensive labels")  # fmt: skip
        if previous is None:
            raise ValueError("rounds is 0: the difference needs at least one round's model")
        difference = self._final_difference(pool, previous)
        final = self._distil(pool, difference)
        model = self._calibrate(final, list(starts))
        written = self.directory / "model.ckpt"
        shutil.copyfile(model, written)
        self.report(f"wrote {written} (distilled from {len(pool)} frames, {len(self.store.labelled)} expensive labels)")
        self._composite(difference)
        return written

    # --- the stages -------------------------------------------------------------------------------------
    def _pool(self, starts: list[Atoms], pretrained: Path) -> list[Atoms]:
        path = self.directory / "pool.extxyz"
        if path.exists():
            return ase.io.read(path, index=":")
        settings = self.settings
        runs = max(settings.exploration.replicas, len(starts))
        hold = max(settings.exploration.hold_ps, settings.pool_frames / runs * settings.pool_spacing_fs / 1000)
        exploration = replace(settings.exploration, hold_ps=hold)
        self.report(f"pool: {settings.pool_frames} frames of {runs} runs of {pretrained}'s MD at "
                    f"{exploration.temperature:g} K ({hold:g} ps each), labelled by {self.cheap.name}")  # fmt: skip
        frames: list[Atoms] = []
        for attempt in range(POOL_ATTEMPTS):  # runs that left what the model knows end early: new runs fill in
            frames += self.state.timed("md", sample_frames, self.models(pretrained), starts, exploration,
                                       settings.pool_frames - len(frames), settings.seed + 7 + 100 * attempt,
                                       self.on_md_step, self.explorer)  # fmt: skip
            if len(frames) >= settings.pool_frames:
                break
        if len(frames) < settings.pool_frames:
            self.report(f"pool: {len(frames)} frames of {settings.pool_frames}: the runs kept ending early (the "
                        f"cheap model's uncertainty above {exploration.stop_factor:g} x the threshold)")  # fmt: skip
        pool = []
        for frame, labelled in self._cheap_labels(frames, "pool"):
            labelled.info.update({key: frame.info[key] for key in ("time_fs", "replica") if key in frame.info})
            pool.append(labelled)
        self.directory.mkdir(parents=True, exist_ok=True)
        ase.io.write(path.with_suffix(".partial"), pool, format="extxyz")
        path.with_suffix(".partial").replace(path)
        return pool

    def _differences(self, pool: list[Atoms]) -> list[Atoms]:
        """Every pool frame the expensive oracle labelled, as expensive - cheap (energy eV, forces eV/Å)."""
        return [_difference(frame, pool[index]) for index, frame in self._expensive_by_index().items()]

    def _picks(self, round: int, record, pool: list[Atoms], checkpoint: Path) -> list[Pick]:
        path = checkpoint.parent / "candidates.extxyz"
        if path.exists():
            return read_picks(path)
        uncertainty = self.state.timed("training", pool_uncertainty, self.models(checkpoint), pool)
        labelled = {int(key.removeprefix("pool-")) for key in self.store.keys if key.startswith("pool-")}
        chosen = pick_uncertain(pool, uncertainty, labelled, self.settings.threshold, self.settings.cap,
                                self.settings.spacing_fs)  # fmt: skip
        record.max_uncertainty = float(max((u for k, u in enumerate(uncertainty) if k not in labelled), default=0.0))
        record.candidates = int(sum(u > self.settings.threshold for u in uncertainty))
        record.picked = len(chosen)
        reason = f"difference uncertainty above {self.settings.threshold} eV/Å, round {round}"
        picks = [self._pick(pool, index, float(uncertainty[index]), reason) for index in chosen]
        write_picks(path, picks)
        self.state.save()
        return picks

    def _final_difference(self, pool: list[Atoms], last_round: Path) -> Path:
        """The difference model the distillation labels with (``difference/model.ckpt``): ``final_preset`` trained
        anew on every expensive label of the pool for ``difference_epochs``, fitted to ``difference_share`` of the
        final stage's time; the last round's model when ``difference_epochs`` is 0. The rounds' models only choose
        frames, and a round's few epochs leave the difference less well learned than its labels allow."""
        settings = self.settings
        if not settings.difference_epochs:
            return last_round
        model, labels = self.directory / "difference" / "model.ckpt", self.directory / "difference" / "labels.json"
        differences = self._differences(pool)
        if model.exists() and labels.exists() and json.loads(labels.read_text())["labels"] == len(differences):
            return model
        seconds = self._final_seconds()
        seconds = seconds * settings.difference_share if seconds else None
        within = f" (fitted to {seconds / 60:.1f} min of the time budget)" if seconds else ""
        self.report(f"the difference model: {settings.final_preset}, {settings.difference_epochs} epochs on "
                    f"{len(differences)} expensive labels{within}")  # fmt: skip
        training = replace(settings.training, preset=settings.final_preset, learning_rate=settings.final_learning_rate)
        self.state.timed("training", self.trainer, differences, model.parent, training, settings.rounds + 1, None,
                         settings.difference_epochs, seconds)  # fmt: skip
        labels.write_text(json.dumps({"labels": len(differences)}))
        return model

    def _distil(self, pool: list[Atoms], difference: Path) -> Path:
        final, expensive = self.directory / "final" / "model.ckpt", self._expensive_by_index()
        origin = f"{difference}, {len(expensive)} expensive labels"  # the calibration's come later: not counted
        if final.exists() and self.state.final_from == origin:
            return final
        distilled = distilled_frames(pool, expensive, self.models(difference))
        ase.io.write(self.directory / "distilled.extxyz", distilled, format="extxyz")
        settings = self.settings
        training = replace(settings.training, preset=settings.final_preset, learning_rate=settings.final_learning_rate)
        seconds = self._final_seconds()
        within = f" (fitted to {seconds / 60:.1f} min of the time budget)" if seconds else ""
        self.report(
            f"final model: {settings.final_preset}, {settings.final_epochs} epochs on {len(distilled)} "
            f"frames ({len(expensive)} expensive, the rest {self.cheap.name} + difference){within}"
        )
        self.state.timed("training", self.trainer, distilled, final.parent, training, settings.rounds + 1, None,
                         settings.final_epochs, seconds)  # fmt: skip
        self.state.final_from = origin
        self.state.save()
        return final

    def _calibrate(self, model: Path, starts: list[Atoms]) -> Path:
        """``model`` with its uncertainty scales refitted on ``calibration_frames`` expensive labels of its own MD
        (``final/calibrated.ckpt``), its errors on them in ``final/check.json``."""
        count, folder = self.settings.calibration_frames, self.directory / "final"
        calibrated, path, check_path = folder / "calibrated.ckpt", folder / "calibration.extxyz", folder / "check.json"
        if not count:
            return model
        if calibrated.exists() and check_path.exists():
            return calibrated
        if path.exists():
            picks = read_picks(path)
        else:
            exploration = self.settings.exploration
            self.report(f"final model: {count} frames of its MD at {exploration.temperature:g} K for the expensive "
                        "oracle (its uncertainty's scales and a held-out check)")  # fmt: skip
            frames = self.state.timed("md", sample_frames, self.models(model), starts, exploration, count,
                                      self.settings.seed + 500, self.on_md_step, self.explorer)  # fmt: skip
            picks = [Pick(f"calibration-{k}", frame, frame.info["uncertainty"], "calibration: the final model's MD")
                     for k, frame in enumerate(frames)]  # fmt: skip
            write_picks(path, picks)
        self.labeller.label(picks, self.settings.rounds + 1)
        labelled = self.store.labelled_with(pick.key for pick in picks)
        if len(labelled) < 2:
            self.report(f"final model: {len(labelled)} calibration frames labelled, too few: its scales stay")
            return model
        check = self.state.timed("training", calibrated_checkpoint, self.models(model), labelled, calibrated)
        check_path.write_text(json.dumps(check, indent=1))
        force, energy = check["force_mae_ev_per_a"] * 1e3, check["energy_mae_ev"] * 1e3
        factors = check["force_scale_factor"], check["energy_scale_factor"]
        self.report(f"final model on {len(labelled)} frames of its own MD against {self.oracle.name}: force MAE "
                    f"{force:.1f} meV/Å, energy MAE {energy:.1f} meV; uncertainty scales x {factors[0]:.2f} "
                    f"(forces), x {factors[1]:.2f} (energy)")  # fmt: skip
        return calibrated

    def _composite(self, difference: Path) -> Path | None:
        """``composite.ckpt``: the difference model under the cheap method (a checkpoint that names it,
        :mod:`sciml.calculators.baseline`: its MD needs a cheap-oracle call every step), its uncertainty scales
        refitted on the calibration frames (expensive - cheap there) and its errors on them in
        ``difference/check.json``. None without calibration frames or when the cheap oracle cannot be a baseline."""
        path, check_path = self.directory / "composite.ckpt", self.directory / "difference" / "check.json"
        if path.exists() and check_path.exists():
            return path
        calibration = self.directory / "final" / "calibration.extxyz"
        if self.cheap.baseline is None or not calibration.exists():
            return None
        labelled = self.store.labelled_with(pick.key for pick in read_picks(calibration))
        differences = [_difference(frame, cheap) for frame, cheap in self._cheap_labels(labelled, "composite")]
        if len(differences) < 2:
            return None
        check = self.state.timed("training", calibrated_checkpoint, self.models(difference), differences, path)
        write_baseline(path, self.cheap.baseline)
        check_path.write_text(json.dumps(check, indent=1))
        force, energy = check["force_mae_ev_per_a"] * 1e3, check["energy_mae_ev"] * 1e3
        self.report(f"wrote {path}: {self.cheap.name} + the difference model (its MD calls {self.cheap.name} every "
                    f"step); on the {len(differences)} calibration frames against {self.oracle.name}: force MAE "
                    f"{force:.1f} meV/Å, energy MAE {energy:.1f} meV")  # fmt: skip
        return path

    # --- helpers ----------------------------------------------------------------------------------------
    def _pick(self, pool: list[Atoms], index: int, uncertainty: float, reason: str) -> Pick:
        frame = pool[index]
        bare = Atoms(frame.numbers, frame.positions, cell=frame.cell, pbc=frame.pbc)
        return Pick(f"pool-{index}", bare, uncertainty, f"{reason} (pool frame {index})")

    def _cheap_labels(self, frames: Sequence[Atoms], stage: str) -> list[tuple[Atoms, Atoms]]:
        """``(frame, its cheap label)`` for each of ``frames`` the cheap oracle labels; a failure is reported (for
        ``stage``) and the frame left out."""
        pairs = []
        for frame in frames:
            try:
                pairs.append((frame, self.state.timed("oracle", self.cheap.label, frame)))
            except OracleFailure as failure:
                self.report(f"{stage}: {self.cheap.name} failed on a frame, left out ({failure})")
        return pairs

    def _expensive_by_index(self) -> dict[int, Atoms]:
        pairs = zip(self.store.labelled, self.store.labelled_records, strict=True)
        return {int(r.key.removeprefix("pool-")): frame for frame, r in pairs if r.key.startswith("pool-")}

    def _round_fits(self) -> bool:
        """Another round fits before the final share of the time budget (the last round's seconds as its cost)."""
        budget = self.settings.time_budget_min
        if budget is None:
            return True
        spent = sum(self.state.seconds.values())
        rounds = max(len([r for r in self.state.rounds if r.labelled is not None]), 1)
        per_round = spent / (rounds + 1)  # the pool and the seeds count as one round
        return spent + per_round <= (1 - self.settings.final_share) * budget * 60

    def _final_seconds(self) -> float | None:
        """Seconds of the final training: the budget left, less the calibration's expensive labels."""
        budget = self.settings.time_budget_min
        if budget is None:
            return None
        labels = max(len(self.store.labelled), 1)
        calibration = self.settings.calibration_frames * self.state.seconds["oracle"] / labels + 60.0
        left = budget * 60 - sum(self.state.seconds.values()) - calibration
        return max(left, 0.25 * self.settings.final_share * budget * 60)

    def summary(self) -> dict:
        """The level's figures (``two_level.json``'s second level): expensive labels and failures, rounds, the
        held-out check of the final model, seconds per phase."""
        check, composite = self.directory / "final" / "check.json", self.directory / "difference" / "check.json"
        return {
            "oracle": self.oracle.name,
            "directory": str(self.directory),
            "oracle_calls": len(self.store.labelled) + len(self.store.failed),
            "labelled": len(self.store.labelled),
            "failed": len(self.store.failed),
            "rounds": [record.as_json() for record in self.state.rounds],
            "converged": self.state.converged,
            "check": json.loads(check.read_text()) if check.exists() else None,
            "composite_check": json.loads(composite.read_text()) if composite.exists() else None,
            "seconds": dict(self.state.seconds),
        }


def pool_uncertainty(model, frames: Sequence[Atoms]) -> np.ndarray:
    """(F,) the largest per-atom force uncertainty (eV/Å) of ``model`` (with an uncertainty) on each frame."""
    from sciml.calculators import SciMLCalculator

    calculator = SciMLCalculator(model, uncertainty=True, compile="eager")
    largest = []
    for frame in frames:
        atoms = Atoms(frame.numbers, frame.positions, cell=frame.cell, pbc=frame.pbc)
        atoms.calc = calculator
        atoms.get_forces()
        largest.append(float(np.max(calculator.results["forces_uncertainty"])))
    return np.array(largest)


def pick_uncertain(
    pool: Sequence[Atoms], uncertainty: np.ndarray, labelled: set[int], threshold: float, cap: int, spacing_fs: float
) -> list[int]:
    """At most ``cap`` pool indices not in ``labelled`` whose uncertainty is above ``threshold``, most uncertain
    first, no two of one MD run (``info["replica"]``) within ``spacing_fs`` (``info["time_fs"]``)."""
    chosen: list[int] = []
    for index in np.argsort(-uncertainty, kind="stable"):
        index = int(index)
        if len(chosen) >= cap or uncertainty[index] <= threshold:
            break
        if index in labelled:
            continue
        run, time = pool[index].info.get("replica"), pool[index].info.get("time_fs")
        near = any(pool[k].info.get("replica") == run and time is not None
                   and abs(pool[k].info.get("time_fs", math.inf) - time) < spacing_fs for k in chosen)  # fmt: skip
        if not near:
            chosen.append(index)
    return chosen


def distilled_frames(pool: Sequence[Atoms], expensive: dict[int, Atoms], difference) -> list[Atoms]:
    """Every pool frame labelled at the expensive level: its expensive label where ``expensive`` (pool index ->
    labelled frame) has one, else its cheap label + ``difference``'s prediction (a model of expensive - cheap,
    evaluated in float64)."""
    from sciml.calculators import SciMLCalculator

    calculator = SciMLCalculator(copy.deepcopy(difference), dtype="float64", compile="eager")  # ``difference`` unmoved
    frames = []
    for index, frame in enumerate(pool):
        if index in expensive:
            given = expensive[index]
            frames.append(_labelled(given, given.get_potential_energy(), given.get_forces()))
            continue
        atoms = Atoms(frame.numbers, frame.positions, cell=frame.cell, pbc=frame.pbc)
        atoms.calc = calculator
        energy = frame.get_potential_energy() + atoms.get_potential_energy()
        frames.append(_labelled(frame, energy, frame.get_forces() + atoms.get_forces()))
    return frames


def _difference(expensive: Atoms, cheap: Atoms) -> Atoms:
    """The geometry of ``expensive`` labelled with expensive - cheap (energy eV, forces eV/Å)."""
    energy = expensive.get_potential_energy() - cheap.get_potential_energy()
    return _labelled(expensive, energy, expensive.get_forces() - cheap.get_forces())


def _labelled(frame: Atoms, energy: float, forces: np.ndarray) -> Atoms:
    copy_ = Atoms(frame.numbers, frame.positions, cell=frame.cell, pbc=frame.pbc)
    copy_.calc = SinglePointCalculator(copy_, energy=float(energy), forces=np.asarray(forces))
    return copy_
