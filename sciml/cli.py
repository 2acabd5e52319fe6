"""The ``sciml`` command: a LightningCLI with ``fit``/``validate``/``test``/``predict``.

This is the only module that knows about configs. Values that data and model must agree on are linked,
never typed twice. Each class declares the init arguments it takes from the data module, once, in its
``linked_from_data`` mapping ``{init argument: data-module attribute}``; the CLI reads the classes of the
parsed ``model`` config (nested ones included) and links accordingly:

- :class:`~sciml.models.E2Former`: ``data.cutoff``, ``data.species``, ``data.energy_reference``,
  ``data.force_rms`` and ``data.avg_neighbours`` -> ``cutoff``, ``species``, ``energy_reference``,
  ``energy_scale``, ``avg_neighbours`` (computed from the training split when the data module is built);
  arguments a class lists in ``linked_unless_set`` are linked only when the config leaves them unset;
- :class:`~sciml.training.KoopmanModule`: ``data.lagtime -> lagtime``;
- :class:`~sciml.koopman.MolecularEncoder`: ``data.species``, ``data.cutoff``, ``data.avg_neighbours`` -> ``species``,
  ``cutoff``, ``avg_neighbours``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import os
import sys
from argparse import Namespace

import lightning as L
from lightning.pytorch.cli import LightningCLI, SaveConfigCallback


class SciMLCLI(LightningCLI):
    """LightningCLI that links data-module attributes into the model as its classes declare
    (``linked_from_data``), and refuses remote checkpoints."""

    def _refuse_remote_checkpoint(self) -> None:
        """``--ckpt_path`` must be a local file: Lightning would fetch and unpickle a remote address."""
        ckpt_path = self.config.get(self.subcommand, {}).get("ckpt_path")
        if ckpt_path and "://" in str(ckpt_path):
            raise ValueError(f"--ckpt_path '{ckpt_path}' is a remote address; download it and pass the local file")

    before_fit = before_validate = before_test = before_predict = _refuse_remote_checkpoint

    def __init__(self, *args, **kwargs) -> None:
        self.linked_parsers: list = []  # filled while LightningCLI builds its parsers, in its __init__
        super().__init__(*args, **kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        """Keep each subcommand's parser (Lightning's hook, called once per parser) for the data links."""
        self.linked_parsers.append(parser)

    def parse_arguments(self, parser, args) -> None:
        """Parse once without validation to learn the model's classes (from any config source: files, ``-c``,
        command line, environment), link what they take from the data in every subcommand's parser (only the
        one run instantiates), then parse for real."""
        first = _unvalidated_parse(parser, args)
        subcommand = first.get("subcommand") if first is not None else None
        if subcommand is not None:
            links = data_links(first[subcommand].get("model"))
            for subparser, (target, attribute) in itertools.product(self.linked_parsers, links.items()):
                subparser.link_arguments("data", target, compute_fn=_DataAttribute(attribute), apply_on="instantiate")
        super().parse_arguments(parser, args)


def _unvalidated_parse(parser, args) -> Namespace | None:
    """The parsed config without validation, printing or exiting (``--print_config`` left out: the real parse
    prints it); ``None`` when it does not parse (the real parse then reports the problem, or prints the help).
    Validation is skipped with jsonargparse's ``_skip_validation`` keyword (documented in its source, the one
    way to read a config whose linked values are still missing)."""
    args = list(sys.argv[1:] if args is None else args)
    quiet = [arg for arg in args if arg.split("=", 1)[0] != "--print_config"]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return parser.parse_args(quiet, _skip_validation=True)
    except SystemExit:
        return None


def data_links(config, prefix: str = "model") -> dict[str, str]:
    """``{config key: data-module attribute}`` for the class of ``config`` (a parsed ``class_path`` /
    ``init_args`` namespace) and, recursively, for the classes of its init arguments."""
    if not isinstance(config, Namespace) or not isinstance(getattr(config, "class_path", None), str):
        return {}
    module, _, name = config.class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return {}  # the real parse names the unknown class
    init_args = getattr(config, "init_args", None) or Namespace()
    given = {arg for arg in getattr(cls, "linked_unless_set", ()) if getattr(init_args, arg, None) is not None}
    links = {
        f"{prefix}.init_args.{arg}": attr
        for arg, attr in getattr(cls, "linked_from_data", {}).items()
        if arg not in given  # a value in the config wins over the data's (and is recorded with the model)
    }
    for arg, value in vars(init_args).items():
        links.update(data_links(value, f"{prefix}.init_args.{arg}"))
    return links


class _DataAttribute:
    """``data -> data.<attribute>``, with an error naming both when the data module has no such attribute."""

    def __init__(self, attribute: str) -> None:
        self.attribute = attribute

    def __call__(self, data):
        if not hasattr(data, self.attribute):
            raise ValueError(
                f"the model takes '{self.attribute}' from the data module, but {type(data).__name__} has none; "
                "use a data module that provides it (e.g. sciml.data.AtomsDataModule for molecular models)"
            )
        return getattr(data, self.attribute)


class KeepingSaveConfig(SaveConfigCallback):
    """Saves the run's config as ``config.yaml`` in the log directory or, when a run there already saved one
    (the same ``default_root_dir`` without a versioning logger, a resumed run), as ``config.1.yaml``,
    ``config.2.yaml``, ...: an earlier run's config is never overwritten."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        if not self.already_saved and self.save_to_log_dir:
            name = _free_name(trainer.log_dir, self.config_filename) if trainer.is_global_zero else None
            self.config_filename = trainer.strategy.broadcast(name)
        super().setup(trainer, pl_module, stage)


def _free_name(directory: str | None, filename: str) -> str:
    stem, suffix = os.path.splitext(filename)
    candidates = (filename if k == 0 else f"{stem}.{k}{suffix}" for k in itertools.count())
    return next(c for c in candidates if not os.path.exists(os.path.join(directory or ".", c)))


# subcommands that are not Lightning runs: (module, one line for ``sciml --help``)
COMMANDS = {
    "md": ("sciml.commands.md", "molecular dynamics of a structure with a trained potential (one or many replicas)"),
    "learn": ("sciml.commands.learn", "a potential with calibrated uncertainty from a molecule and a quantum-chemistry "
              "oracle, learned on the fly"),
    "pipeline": ("sciml.commands.pipeline", "from a molecule to its kinetics report: learn, replica MD, kinetics"),
    "kinetics": ("sciml.commands.kinetics", "timescales, CK test, states, populations and MFPTs with error bars "
                 "from trajectories"),
    "export": ("sciml.commands.export", "a trained potential as a metatomic model file (LAMMPS, i-PI, ASE, ...)"),
    "serve": ("sciml.commands.serve", "a trained potential as an i-PI client"),
    "data": ("sciml.commands.data", "sciml data prepare: an HDF5 frame store for data larger than memory"),
}  # fmt: skip


# the Lightning runs, one line each
LIGHTNING_RUNS = {
    "fit": "train a model from a config (sciml fit --config configs/e2former/quickstart.yaml)",
    "validate": "evaluate a checkpoint on the validation split",
    "test": "evaluate a checkpoint on the test split",
    "predict": "write a checkpoint's predictions (and uncertainties) for new frames",
}


def overview() -> str:
    """``sciml --help``: every subcommand with one line."""
    lines = ["usage: sciml <command> [options]   (sciml <command> --help: its options)", "", "commands:"]
    summaries = {**LIGHTNING_RUNS, **{name: summary for name, (_, summary) in COMMANDS.items()}}
    width = max(map(len, summaries))
    lines += [f"  {name:<{width}}  {summary}" for name, summary in summaries.items()]
    lines += ["", "Options are kebab-case and mean one thing in every command (--output, --timestep in fs, --replicas,",
              "--dtype float32 by default); sciml fit's --section.key options mirror its YAML config."]  # fmt: skip
    return "\n".join(lines)


def main(args: list[str] | None = None) -> None:
    """Entry point of ``sciml`` and ``python -m sciml``: ``sciml md ...`` and the other commands, or a Lightning
    run; ``sciml``, ``sciml -h`` and ``sciml --help`` list them all."""
    args_list = list(sys.argv[1:] if args is None else args)
    if not args_list or args_list[0] in ("-h", "--help"):
        print(overview())
        return
    if args_list[0] in COMMANDS:
        importlib.import_module(COMMANDS[args_list[0]][0]).main(args_list[1:])
        return
    run(args)


def run(args: list[str] | None = None) -> SciMLCLI:
    """Run the CLI on ``args`` (default: ``sys.argv``) and return it, with its trainer, model and data."""
    return SciMLCLI(
        L.LightningModule,
        L.LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=KeepingSaveConfig,
        parser_kwargs={"epilog": "Every sciml command, with one line each: sciml --help."},
        args=args,
    )
