"""The ``sciml`` command: a LightningCLI with ``fit``/``validate``/``test``/``predict``.

This is the only module that knows about configs. Values that data and model must agree on are linked,
never typed twice. The links depend on the model family, which is read from the ``model`` class given in
the configs or on the command line:

- potentials (:class:`~sciml.training.PotentialModule`): ``data.cutoff``, ``data.species``,
  ``data.energy_reference`` and ``data.force_rms`` -> ``model.model.{cutoff, species, energy_reference,
  energy_scale}`` (computed from the training split when the data module is built);
- Koopman models (:class:`~sciml.training.KoopmanModule`): ``data.lagtime -> model.lagtime``; on
  molecular data (:class:`~sciml.data.AtomsDataModule`) also ``data.species``, ``data.cutoff`` ->
  ``model.encoder_f.{species, cutoff}`` (a :class:`~sciml.koopman.MolecularEncoder`).
"""

from __future__ import annotations

import importlib
import sys

import lightning as L
import yaml
from lightning.pytorch.cli import LightningCLI

POTENTIAL_LINKS = {
    "cutoff": lambda data: data.cutoff,
    "species": lambda data: data.species,
    "energy_reference": lambda data: data.energy_reference,
    "energy_scale": lambda data: data.force_rms,
}
MOLECULAR_ENCODER_LINKS = {"species": lambda data: data.species, "cutoff": lambda data: data.cutoff}


class SciMLCLI(LightningCLI):
    """LightningCLI with sciml's argument links for the model family ``family`` ("potential", "koopman");
    ``molecular``: the data are atoms (their species and cutoff go into a Koopman model's encoder)."""

    def __init__(self, *args, family: str | None = None, molecular: bool = False, **kwargs) -> None:
        self.family, self.molecular = family, molecular
        super().__init__(*args, **kwargs)

    def _refuse_remote_checkpoint(self) -> None:
        """``--ckpt_path`` must be a local file: Lightning would fetch and unpickle a remote address."""
        ckpt_path = self.config.get(self.subcommand, {}).get("ckpt_path")
        if ckpt_path and "://" in str(ckpt_path):
            raise ValueError(f"--ckpt_path '{ckpt_path}' is a remote address; download it and pass the local file")

    before_fit = before_validate = before_test = before_predict = _refuse_remote_checkpoint

    def add_arguments_to_parser(self, parser) -> None:
        if self.family == "potential":
            for name, compute in POTENTIAL_LINKS.items():
                parser.link_arguments(
                    "data", f"model.init_args.model.init_args.{name}", compute_fn=compute, apply_on="instantiate"
                )
        elif self.family == "koopman":
            parser.link_arguments("data.init_args.lagtime", "model.init_args.lagtime", apply_on="instantiate")
            if self.molecular:
                for name, compute in MOLECULAR_ENCODER_LINKS.items():
                    parser.link_arguments(
                        "data",
                        f"model.init_args.encoder_f.init_args.{name}",
                        compute_fn=compute,
                        apply_on="instantiate",
                    )


def config_classes(args: list[str]) -> dict[str, str]:
    """The ``model`` and ``data`` class paths named by ``--config`` (or ``-c``) files or ``--model``/``--data`` in
    ``args`` (later ones win)."""
    classes: dict[str, str] = {}
    for k, arg in enumerate(args):
        key, _, value = arg.partition("=")
        if not value and k + 1 < len(args):
            value = args[k + 1]
        if key in ("--config", "-c"):
            try:
                with open(value) as handle:
                    config = yaml.safe_load(handle) or {}
            except (OSError, yaml.YAMLError):
                continue  # LightningCLI reports unreadable configs itself
            for section in ("model", "data"):
                entry = config.get(section) if isinstance(config, dict) else None
                class_path = entry.get("class_path") if isinstance(entry, dict) else entry
                if isinstance(class_path, str):
                    classes[section] = class_path
        elif key in ("--model", "--model.class_path", "--data", "--data.class_path"):
            classes[key[2:].split(".")[0]] = value
    return classes


def _family_of(class_path: str | None) -> str | None:
    """The family ("potential", "koopman" or None) of the model class ``class_path``."""
    if not class_path or "." not in class_path:
        return None
    from sciml.training import KoopmanModule, PotentialModule

    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    if isinstance(cls, type) and issubclass(cls, PotentialModule):
        return "potential"
    if isinstance(cls, type) and issubclass(cls, KoopmanModule):
        return "koopman"
    return None


def main(args: list[str] | None = None) -> None:
    """Entry point of ``sciml`` and ``python -m sciml``."""
    run(args)


def run(args: list[str] | None = None) -> SciMLCLI:
    """Run the CLI on ``args`` (default: ``sys.argv``) and return it, with its trainer, model and data."""
    args_list = list(sys.argv[1:] if args is None else args)
    classes = config_classes(args_list)
    return SciMLCLI(
        L.LightningModule,
        L.LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        family=_family_of(classes.get("model")),
        molecular=classes.get("data", "").rpartition(".")[2] == "AtomsDataModule",
        args=args,
    )
