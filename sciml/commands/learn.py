"""``sciml learn``: a potential with calibrated uncertainty from a molecule and a quantum-chemistry oracle.

    sciml learn --smiles 'CC(=O)Oc1ccccc1C(=O)O' --temperature 500 --output runs/learn-aspirin
    sciml learn --config configs/learn/aspirin.yaml

Starts from a SMILES string (RDKit ETKDG + MMFF; ``--conformers N`` explores from up to N distinct
conformers), a structure file (``--structure``) or a labelled dataset
(``--dataset``); labels with GFN2-xTB (``--oracle gfn2-xtb``, the default) or PySCF DFT (``--oracle pyscf
--xc PBE --basis def2-SVP``); trains, explores with ramped ML Langevin MD and labels the frames above
``--threshold`` until a whole exploration run stays below it, then confirms the final model with a longer
run (:mod:`sciml.active.loop`). Running the same
command again in the same ``--output`` resumes without relabelling anything. ``--config`` reads the
options from a YAML file (keys are the option names with underscores); options on the command line win.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import yaml
from tqdm import tqdm

from sciml.active.difference import DifferenceSettings
from sciml.active.exploration import ExplorationSettings
from sciml.active.label_cache import LabelCache
from sciml.active.labelling import Labeller, local_pool
from sciml.active.loop import LearningSettings
from sciml.active.training import COMMITTEE_DATA, UNCERTAINTIES, TrainingSettings
from sciml.commands.options import add_index, add_renamed, renamed_config_keys

#: Config keys renamed with their options (old -> new), read under the new name for one release.
RENAMED_KEYS = {"directory": "output"}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sciml learn", description=__doc__.split("\n\n")[0])
    add_learning_arguments(parser)
    return parser


def add_learning_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``sciml learn`` (also those of ``sciml pipeline``'s first stage)."""
    add = parser.add_argument
    add("--config", help="YAML file of options (keys: option names with underscores)")
    start = parser.add_argument_group("start (one of)")
    start.add_argument("--smiles", help="SMILES string: RDKit ETKDG embedding relaxed with MMFF94")
    start.add_argument("--structure", help="a structure file ASE reads (--index picks the frame)")
    start.add_argument("--dataset", help="labelled frames (extxyz, .traj) as the seed set; MD starts at the first")
    add_index(parser)
    add("--conformers", type=int, default=1,
        help="with --smiles: explore from up to this many distinct MMFF conformers, in turn")  # fmt: skip
    add("--output", default="runs/learn", help="run directory: the store, checkpoints, state (resumed)")
    add_renamed(parser, "--directory", "--output", "output")
    oracle = parser.add_argument_group("oracle")
    oracle.add_argument("--oracle", default="gfn2-xtb", choices=("gfn2-xtb", "pyscf"))
    oracle.add_argument("--xc", default="PBE", help="pyscf: exchange-correlation functional")
    oracle.add_argument("--basis", default="def2-SVP", help="pyscf: basis set")
    oracle.add_argument("--charge", type=int, default=0, help="pyscf: total charge")
    oracle.add_argument("--spin", type=int, default=0, help="pyscf: 2S (unpaired electrons)")
    oracle.add_argument("--pretrain", choices=("gfn2-xtb", "none"),
                        help="learn with this cheap oracle first (in <output>/pretrain), then with --oracle from "
                             "its model and frames: the expensive labels only where its model needs them")  # fmt: skip
    transfer = DifferenceSettings()
    oracle.add_argument("--transfer", default="fine-tune", choices=("fine-tune", "difference"),
                        help="with --pretrain: how the expensive level learns from the cheap one: fine-tune its "
                             "model on --oracle labels where the fine-tuned model is uncertain (its own MD), or "
                             "learn --oracle - cheap on frames of the cheap model's MD where that difference is "
                             "uncertain and distil cheap + difference into one model")  # fmt: skip
    oracle.add_argument("--pool-frames", type=int, default=transfer.pool_frames,
                        help="--transfer difference: frames of the cheap model's MD: the candidates and the "
                             "distilled model's training set")  # fmt: skip
    oracle.add_argument("--pool-spacing-fs", type=float, default=transfer.pool_spacing_fs,
                        help="--transfer difference: fs between the pool frames of one MD run")  # fmt: skip
    oracle.add_argument("--transfer-rounds", type=int, default=transfer.rounds,
                        help="--transfer difference: rounds of the difference model after --seed-frames")  # fmt: skip
    oracle.add_argument("--transfer-cap", type=int, default=transfer.cap,
                        help="--transfer difference: expensive labels per round, at most")  # fmt: skip
    oracle.add_argument("--difference-epochs", type=int, default=transfer.difference_epochs,
                        help="--transfer difference: epochs of the difference model the pool is labelled with "
                             "(the final size, on every expensive label; 0: the last round's)")  # fmt: skip
    oracle.add_argument("--transfer-threshold", type=float, default=transfer.threshold,
                        help="--transfer difference: eV/Å, the difference's largest per-atom force uncertainty "
                             "above which a pool frame is labelled")  # fmt: skip
    oracle.add_argument("--dispersion", default="none", choices=("none", "d3bj", "d4"),
                        help="pyscf: Grimme's dispersion correction (pyscf-dispersion)")  # fmt: skip
    oracle.add_argument("--density-fit", action=argparse.BooleanOptionalAction, default=True,
                        help="pyscf: density fitting of the two-electron integrals")  # fmt: skip
    oracle.add_argument("--label-cache", help="folder of oracle labels keyed by geometry and level, shared by runs: "
                        "a frame labelled before at the same level is read, not computed")  # fmt: skip
    oracle.add_argument("--label-workers", type=int,
                        help="label a round's picks in this many one-thread worker processes (0: one by one, "
                             "here; default: one per core for pyscf, 0 for gfn2-xtb)")  # fmt: skip
    md = parser.add_argument_group("exploration (ML Langevin MD)")
    defaults = ExplorationSettings()
    md.add_argument("--temperature", type=float, default=defaults.temperature, help="K: the target")
    md.add_argument("--start-temperature", type=float, default=defaults.start_temperature, help="K: ramp start")
    md.add_argument("--ramp-ps", type=float, default=defaults.ramp_ps, help="ps of the linear ramp")
    md.add_argument("--hold-ps", type=float, default=defaults.hold_ps, help="ps at the target after the ramp")
    md.add_argument("--timestep", type=float, default=defaults.timestep, help="fs")
    md.add_argument("--friction", type=float, default=defaults.friction, help="1/fs")
    md.add_argument("--threshold", type=float, default=defaults.threshold,
                    help="eV/Å: largest per-atom force uncertainty above which a frame is labelled")  # fmt: skip
    md.add_argument("--stop-factor", type=float, default=defaults.stop_factor,
                    help="the run ends when above stop-factor x threshold for --patience-fs")  # fmt: skip
    md.add_argument("--patience-fs", type=float, default=defaults.patience_fs,
                    help="fs above the upper level before the run ends")  # fmt: skip
    md.add_argument("--cap", type=int, default=defaults.cap, help="frames labelled per round, at most")
    md.add_argument("--exploration-replicas", type=int, default=defaults.replicas,
                    help="exploration runs advanced together in one batched model call per step (each with the "
                         "ramp and hold; a molecule of 20 atoms: 4 replicas cost 1.1x one on 2 CPU cores)")  # fmt: skip
    md.add_argument("--spacing-fs", type=float, default=defaults.spacing_fs, help="fs between picked frames, at least")
    md.add_argument("--uncertainty-bias", type=float, default=defaults.uncertainty_bias,
                    help="explore on E - tau sigma_E, tau in standard deviations of the energy (a last-layer "
                         "model): drawn to what it does not know; the final model's runs are unbiased")  # fmt: skip
    loop = parser.add_argument_group("loop and training")
    add_loop = loop.add_argument
    loop_defaults = LearningSettings()
    add_loop("--rounds", type=int, default=loop_defaults.rounds, help="exploration rounds, at most")
    add_loop("--seed-frames", type=int, default=loop_defaults.seed_frames, help="rattled copies labelled first")
    add_loop("--seed-displacement", type=float, default=loop_defaults.seed_displacement,
             help="Å: the largest displacement of the seed set")  # fmt: skip
    add_loop("--seed", type=int, default=loop_defaults.seed, help="seed of the seed set, splits, initialisation and MD")
    add_loop(
        "--confirmations",
        type=int,
        default=loop_defaults.confirmations,
        help="retrainings of the final model after a confirmation run above --confirm-level (0: no run)",
    )
    add_loop("--confirm-hold-ps", type=float, default=loop_defaults.confirm_hold_ps,
             help="ps at the target of the final model's confirmation run (after the ramp)")  # fmt: skip
    add_loop("--confirm-level", type=float, default=loop_defaults.confirm_level,
             help="the confirmation run must stay at or below this times the threshold (0 to 1]")  # fmt: skip
    add_loop("--calibration-frames", type=int, default=loop_defaults.calibration_frames,
             help="frames of the final model's MD, labelled, that refit its uncertainty scales (0: none)")  # fmt: skip
    add_loop("--time-budget", type=float, default=loop_defaults.time_budget_min,
             help="minutes (oracle, training, MD) to write the final model in, calibrated and confirmed: "
                  "a round starts only if it and the final stage fit; the final training gets the rest "
                  "(with --pretrain: both levels together)")  # fmt: skip
    add_loop("--pretrain-budget", type=float,
             help="with --pretrain and --time-budget: minutes of the cheap level (default a third of "
                  "--time-budget); the expensive level gets the rest of --time-budget")  # fmt: skip
    training = TrainingSettings()
    add_loop("--preset", default=training.preset, choices=("small", "medium", "large"), help="E2Former size")
    add_loop("--uncertainty", default=training.uncertainty, choices=UNCERTAINTIES)
    add_loop("--committee-size", type=int, default=training.committee_size)
    add_loop("--committee-data", default=training.committee_data, choices=COMMITTEE_DATA,
             help="what a committee's members train on: every frame, or each its own bootstrap resample")  # fmt: skip
    add_loop("--force-samples", type=int, default=training.force_samples,
             help="last-layer force uncertainty from this many posterior samples' forces")  # fmt: skip
    add_loop("--density-components", type=int, default=training.density_components,
             help="last-layer force uncertainty from a feature density of this many components per element "
                  "(default 8 without --force-samples; 0 and no --force-samples: the energy rigidity)")  # fmt: skip
    add_loop("--epochs", type=int, default=training.epochs, help="epochs of the first round")
    add_loop("--epochs-per-round", type=int, default=training.epochs_per_round, help="epochs of later rounds")
    add_loop("--final-epochs", type=int, default=training.final_epochs,
             help="epochs of the final model on everything labelled (0: keep the last round's)")  # fmt: skip
    add_loop("--batch-size", type=int, default=training.batch_size)
    add_loop("--cutoff", type=float, default=training.cutoff, help="Å")
    add("--no-progress", action="store_true", help="no MD progress bar")


def parse(args: list[str], build: Callable[[], argparse.ArgumentParser] = parser) -> argparse.Namespace:
    """Options from ``--config`` (if any), then the command line, of the parser ``build()`` makes."""
    first = build()
    known, _ = first.parse_known_args(args)
    if known.config:
        values = yaml.safe_load(Path(known.config).read_text()) or {}
        values = renamed_config_keys(values, RENAMED_KEYS, known.config, first.prog)
        options = set(vars(build().parse_known_args([])[0]))  # every option's destination, with its default
        unknown = sorted(set(values) - options)
        if unknown:
            raise SystemExit(f"{first.prog}: {known.config}: unknown options {unknown}")
        first.set_defaults(**values)
    options = first.parse_args(args)
    options.pretrain = None if options.pretrain == "none" else options.pretrain  # a config's pretrain, turned off
    if sum(value is not None for value in (options.smiles, options.structure, options.dataset)) != 1:
        first.error("give exactly one of --smiles, --structure or --dataset")
    if options.conformers < 1 or (options.conformers > 1 and not options.smiles):
        first.error("--conformers must be >= 1, and more than 1 only with --smiles")
    return options


def main(args: list[str]) -> dict:
    options = parse(args)
    if options.pretrain:
        return two_levels(options)
    loop, starts, dataset, bar = learning_loop(options)
    loop.run(starts, dataset)
    bar.close()
    summary = loop.summary()
    (Path(options.output) / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def two_levels(options: argparse.Namespace) -> dict:
    """``--pretrain``: learn with the cheap oracle in ``<output>/pretrain``, then with ``--oracle`` in
    ``<output>`` from its model and frames (:mod:`sciml.active.two_level`); returns ``two_level.json``."""
    from sciml.active.two_level import learn_on_two_levels

    started = start_of(options)  # the starts of both levels, built once (RDKit's conformers for a SMILES)
    starts, dataset, _ = started
    if dataset is not None:
        sys.exit("sciml: --pretrain explores from a structure: give --smiles or --structure, not --dataset")
    bars = []

    total = options.time_budget
    cheap_budget = options.pretrain_budget or (total / 3 if total else None)
    if total and not 0 < cheap_budget < total:
        sys.exit(f"sciml: --pretrain-budget must be between 0 and --time-budget ({total:g} min), got {cheap_budget:g}")

    def loop_with(oracle: str, budget: Callable[[float], float | None]) -> Callable[..., object]:
        def build(folder: Path, spent_minutes: float = 0.0):
            level = argparse.Namespace(**{**vars(options), "time_budget": budget(spent_minutes)})
            loop, _, _, bar = learning_loop(level, folder, oracle, started)
            bars.append(bar)
            return loop

        return build

    def rest(spent_minutes: float) -> float | None:  # the expensive level: what the cheap one left, at least 1/3
        return None if total is None else max(total - spent_minutes, total / 3)

    cheap, expensive = loop_with(options.pretrain, lambda _: cheap_budget), loop_with(options.oracle, rest)
    if options.transfer == "difference":
        expensive = partial(difference_level, options, started, bars, rest)
    learn_on_two_levels(options.output, cheap, expensive, starts, tqdm.write)
    for bar in bars:
        bar.close()
    summary = json.loads((Path(options.output) / "two_level.json").read_text())
    (Path(options.output) / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def difference_level(
    options: argparse.Namespace,
    started: tuple,
    bars: list,
    budget: Callable[[float], float | None],
    folder: Path,
    spent_minutes: float = 0.0,
):
    """``--transfer difference``'s expensive level in ``folder`` (:class:`~sciml.active.difference.DifferenceLevel`):
    the exploration, training and labelling options of the loop, the time ``budget(spent_minutes)`` leaves."""
    from sciml.active import oracle_by_name
    from sciml.active.difference import DifferenceLevel

    level = argparse.Namespace(**{**vars(options), "time_budget": budget(spent_minutes)})
    loop, _, _, bar = learning_loop(level, folder, options.oracle, started)  # the oracle, labeller and settings
    bars.append(bar)
    cheap = oracle_by_name(options.pretrain)
    if options.label_cache:
        cheap.cache = LabelCache(options.label_cache)
    settings = DifferenceSettings(
        loop.settings.exploration, loop.settings.training, options.pool_frames, options.pool_spacing_fs,
        seed_frames=options.seed_frames,
        cap=options.transfer_cap, rounds=options.transfer_rounds, threshold=options.transfer_threshold,
        spacing_fs=options.spacing_fs, difference_epochs=options.difference_epochs,
        final_epochs=options.final_epochs, calibration_frames=options.calibration_frames,
        time_budget_min=level.time_budget, seed=options.seed, source=loop.settings.source,
    )  # fmt: skip
    labeller = partial(Labeller, executor=loop.labeller.executor)
    return DifferenceLevel(folder, cheap, loop.oracle, settings, tqdm.write, loop.on_md_step, labeller)


def start_of(options: argparse.Namespace) -> tuple[list, list | None, str]:
    """``(start structures, dataset or None, source)`` of the run the options describe."""
    try:
        from sciml.active.structures import conformers_from_smiles, read_structure

        if options.smiles:
            starts = conformers_from_smiles(options.smiles, options.conformers, options.seed)
            source = f"smiles:{options.smiles}"
            if options.conformers > 1:  # a run from one start keeps its source: it resumes as before
                source += f" conformers:{options.conformers}"
            return starts, None, source
        if options.structure:
            return [read_structure(options.structure, options.index)], None, f"structure:{options.structure}"
        import ase.io

        dataset = ase.io.read(options.dataset, index=":")
        return [read_structure(options.dataset, 0)], dataset, f"dataset:{options.dataset}"
    except ImportError as error:
        sys.exit(f"sciml: {error}")


def learning_loop(
    options: argparse.Namespace,
    directory: str | Path | None = None,
    oracle_name: str | None = None,
    started: tuple[list, list | None, str] | None = None,
) -> tuple:
    """``(ActiveLearning, start structures, dataset or None, progress bar)`` from the parsed options; the loop
    runs in ``directory`` (default ``options.output``) with the oracle ``oracle_name`` (default ``--oracle``),
    from ``started`` (what :func:`start_of` returned, when the caller has it already)."""
    try:
        from sciml.active import ActiveLearning, oracle_by_name

        oracle_name = oracle_name or options.oracle
        oracle_options = {"xc": options.xc, "basis": options.basis, "charge": options.charge, "spin": options.spin,
                          "dispersion": None if options.dispersion == "none" else options.dispersion,
                          "density_fit": options.density_fit}  # fmt: skip
        oracle = oracle_by_name(oracle_name, **(oracle_options if oracle_name == "pyscf" else {}))
    except ImportError as error:
        sys.exit(f"sciml: {error}")
    if options.label_cache:
        oracle.cache = LabelCache(options.label_cache)
    starts, dataset, source = started or start_of(options)
    exploration = ExplorationSettings(options.temperature, options.start_temperature, options.ramp_ps, options.hold_ps,
                                      options.timestep, options.friction, options.threshold, options.stop_factor,
                                      options.patience_fs, cap=options.cap, spacing_fs=options.spacing_fs,
                                      replicas=options.exploration_replicas,
                                      uncertainty_bias=options.uncertainty_bias)  # fmt: skip
    training = TrainingSettings(options.preset, options.uncertainty, options.committee_size, options.cutoff,
                                options.epochs, options.epochs_per_round, options.final_epochs,
                                options.batch_size, seed=options.seed, force_samples=options.force_samples,
                                density_components=options.density_components,
                                committee_data=options.committee_data)  # fmt: skip
    settings = LearningSettings(exploration, training, options.rounds, options.seed_frames, options.seed_displacement,
                                options.seed, source, options.confirmations, options.confirm_hold_ps,
                                options.confirm_level, options.calibration_frames, options.time_budget)  # fmt: skip
    bar = tqdm(total=exploration.steps, unit="step", disable=options.no_progress, dynamic_ncols=True, leave=False)

    def on_md_step(step: int, uncertainty: float) -> None:
        if step == 1:
            bar.reset()
        bar.update(1)
        if step % 20 == 0:
            bar.set_postfix_str(f"σ_F,max {uncertainty:.3f} eV/Å")

    workers = options.label_workers
    if workers is None:  # PySCF: a 9-20-atom label is no faster on two threads than on one (docs/active.md)
        cores = os.cpu_count() or 1
        workers = cores if oracle_name == "pyscf" and cores > 1 else 0
    executor = local_pool(workers) if workers > 0 else None
    loop = ActiveLearning(directory or options.output, oracle, settings, report=tqdm.write, on_md_step=on_md_step,
                          labeller=partial(Labeller, executor=executor))  # fmt: skip
    return loop, starts, dataset, bar
