"""From a structure to its kinetics in one run (what ``sciml pipeline`` does), and the sampling stage that a
reference method's MD shares with it.

Stages, each in its own folder of the run directory and each resumed where it stopped:

1. ``learn/``: a potential from on-the-fly learning (:class:`~sciml.active.ActiveLearning`: a SMILES string, a
   structure or a labelled dataset and an oracle; a given dataset with ``rounds=0`` trains on it alone);
2. ``md/``: R replicas of Langevin MD with that potential (:func:`sample_replicas`; one batched model call per
   step; with several start structures, conformers, replica r starts from start r modulo their number), the
   first ``equilibration_ps`` dropped from the copies in ``production/``; with ``posterior_samples`` S, replica r
   runs on draw r mod S of the potential's own uncertainty (:class:`~sciml.uncertainty.PosteriorSamples`; its
   production frames record ``posterior_sample``), so that the report's intervals carry the potential's error;
3. ``kinetics/``: the report of :func:`~sciml.training.kinetics.molecular_kinetics` on ``production/``
   (timescales, CK test, states, populations and MFPTs with bootstrap intervals), not run again while
   ``pipeline.json`` holds a report of the same sampling and analysis settings.

``pipeline.json`` holds the wall time of each stage (seconds, summed over resumed runs) and the headline numbers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import ase.io
from ase import Atoms

from sciml.data.files import read_complete_frames
from sciml.md import MDSettings, run_replicas, start_structures
from sciml.md.integrators import Potential


@dataclass
class SamplingSettings:
    """R ``replicas`` of Langevin MD at ``temperature`` K: ``equilibration_ps`` then ``production_ps`` each
    (``timestep`` fs, ``friction`` 1/fs), a frame every ``interval`` steps; ``posterior_samples`` S > 0: replica r
    on the potential's posterior draw r mod S (module docstring; a model with an uncertainty estimate; eager
    model calls), 0: all on the trained potential."""

    replicas: int = 32
    production_ps: float = 20.0
    equilibration_ps: float = 5.0
    temperature: float = 300.0
    timestep: float = 1.0
    friction: float = 0.001
    interval: int = 10
    seed: int = 0
    posterior_samples: int = 0

    def __post_init__(self) -> None:
        if self.replicas < 1 or self.production_ps <= 0 or self.equilibration_ps < 0:
            raise ValueError("replicas must be >= 1, production_ps > 0 and equilibration_ps >= 0")
        if not 0 <= self.posterior_samples <= self.replicas or self.posterior_samples == 1:
            raise ValueError(f"posterior_samples must be 0 or between 2 and the replicas ({self.replicas}), "
                             f"got {self.posterior_samples}")  # fmt: skip

    @property
    def steps(self) -> int:
        """Steps of each replica, equilibration included."""
        return round((self.equilibration_ps + self.production_ps) * 1000 / self.timestep)

    def dynamics(self, steps: int | None = None) -> MDSettings:
        """The MD of the sampling (``steps``: default all of them)."""
        return MDSettings("nvt-langevin", self.timestep, self.steps if steps is None else steps, self.temperature,
                          self.seed, self.interval, self.friction)  # fmt: skip


def sample_replicas(
    potential: Potential,
    start: Atoms | Sequence[Atoms],
    settings: SamplingSettings,
    directory: str | Path,
    on_record: Callable[[dict], None] | None = None,
) -> Path:
    """Run (or finish) the replicas of ``settings`` from ``start`` (one structure, or several conformers taken
    in turn by the replicas) with ``potential`` (positions (R, N, 3) Å ->
    energy (R,) eV, forces (R, N, 3) eV/Å: a trained model's :class:`~sciml.calculators.replicas.BatchedPotential`
    or a reference method's :class:`~sciml.calculators.calculator_potential.CalculatorPotential`) in
    ``<directory>/md``, and write the production frames (time >= ``equilibration_ps``) to
    ``<directory>/production``; returns that folder. A run stopped part way continues from its last common frame.
    """
    directory = Path(directory)
    md, production = directory / "md", directory / "production"
    paths = [md / f"replica_{r:03d}.extxyz" for r in range(settings.replicas)]
    done, recorded = _common_step(paths)
    if done is None or done < settings.steps:
        dynamics = settings.dynamics(settings.steps - (done or 0))
        run_replicas(potential, start, settings.replicas, dynamics, md, done is not None, on_record)
        recorded = [read_complete_frames(path) for path in paths]
    production.mkdir(parents=True, exist_ok=True)
    first = settings.equilibration_ps * 1000
    for r, (path, kept) in enumerate(zip(paths, recorded, strict=True)):
        frames = [f for f in kept if float(f.info["time_fs"]) >= first - 1e-9]
        if settings.posterior_samples:
            for frame in frames:
                frame.info["posterior_sample"] = r % settings.posterior_samples
        temporary = production / (path.name + ".partial")
        ase.io.write(temporary, frames, format="extxyz")
        temporary.replace(production / path.name)
    return production


def _common_step(paths: list[Path]) -> tuple[int | None, list[list[Atoms]]]:
    """(the last step every replica file holds, the complete frames of each file); ``None`` and no frames when
    no file holds a frame yet."""
    if not all(path.exists() and path.stat().st_size for path in paths):
        if any(path.exists() and path.stat().st_size for path in paths):
            raise FileNotFoundError(f"'{paths[0].parent}' holds trajectories of fewer replicas than asked for")
        return None, []
    frames = [read_complete_frames(path) for path in paths]
    if not all(frames):
        return None, []
    return min(int(kept[-1].info["step"]) for kept in frames), frames


class Stopwatch:
    """Seconds per stage, summed over resumed runs, kept in ``path`` (JSON) with any other figures."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.record = json.loads(self.path.read_text()) if self.path.exists() else {"seconds": {}}

    def time(self, stage: str, function, *args, **kwargs):
        begin = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            self.record["seconds"][stage] = self.record["seconds"].get(stage, 0.0) + time.perf_counter() - begin
            self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".partial")
        temporary.write_text(json.dumps(self.record, indent=1, default=str))
        temporary.replace(self.path)


def structure_to_kinetics(
    directory: str | Path,
    loop,
    start: Atoms | Sequence[Atoms],
    dataset: list[Atoms] | None,
    sampling: SamplingSettings,
    kinetics: dict | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    report: Callable[[str], None] = print,
    on_record: Callable[[dict], None] | None = None,
) -> dict:
    """The three stages of the module docstring in ``directory``.

    Args:
        loop: an :class:`~sciml.active.ActiveLearning` in ``<directory>/learn`` (its oracle and settings).
        start: the MD start structure, or several conformers (of exploration and of the replicas);
            ``dataset``: labelled frames for the seed set (or ``None``).
        kinetics: keyword arguments of :func:`~sciml.training.kinetics.molecular_kinetics` (lag, n_states, atoms, ...).
        dtype, device: of the potential in the sampling stage.

    Returns:
        ``pipeline.json``'s record: ``seconds`` per stage, ``model``, ``production``, ``report`` (the kinetics
        numbers), ``sampling`` (the settings) and ``replica_steps_per_s``.
    """
    from sciml.calculators import load_model
    from sciml.calculators.replicas import BatchedPotential
    from sciml.training.kinetics import molecular_kinetics
    from sciml.uncertainty import PosteriorSamples

    directory = Path(directory)
    watch = Stopwatch(directory / "pipeline.json")
    model = watch.time("learn", loop.run, start, dataset)
    report(f"stage 1 of 3: potential {model} ({watch.record['seconds']['learn']:.0f} s)")
    first = start_structures(start)[0]
    energy_model = load_model(model, device)
    if sampling.posterior_samples:
        energy_model = PosteriorSamples(energy_model, sampling.posterior_samples, seed=sampling.seed)
    potential = BatchedPotential(energy_model, first.numbers, first.cell[:], first.pbc, device=device, dtype=dtype,
                                 expected_calls=sampling.steps)  # fmt: skip
    speeds: list[float] = []

    def record(state: dict) -> None:
        speeds.append(state["replica_steps_per_s"])
        if on_record is not None:
            on_record(state)

    production = watch.time("sample", sample_replicas, potential, start, sampling, directory, record)
    if speeds:
        watch.record["replica_steps_per_s"] = speeds[-1]
    report(f"stage 2 of 3: {sampling.replicas} replicas x {sampling.production_ps} ps in {production} "
           f"({watch.record['seconds']['sample']:.0f} s)")  # fmt: skip
    analysis = json.loads(json.dumps(kinetics or {}))  # as pipeline.json keeps it
    done = watch.record.get("sampling") == asdict(sampling) and watch.record.get("kinetics_settings") == analysis
    if done and "report" in watch.record and (directory / "kinetics" / "report.json").exists():
        numbers = watch.record["report"]  # stage 3 is done for these settings: not run again
    else:
        numbers = watch.time("kinetics", molecular_kinetics, production, directory / "kinetics", **(kinetics or {}))
    watch.record.update(model=str(model), production=str(production), sampling=asdict(sampling), report=numbers,
                        kinetics_settings=analysis)  # fmt: skip
    watch.save()
    report(f"stage 3 of 3: report in {directory / 'kinetics'} ({watch.record['seconds']['kinetics']:.0f} s)")
    return watch.record
