"""The ``sciml`` command: a LightningCLI with ``fit``/``validate``/``test``/``predict``.

This is the only module that knows about configs. Values that data and model must agree on are linked
(never typed twice): ``data.lagtime -> model.lagtime`` for Koopman models.
"""

from __future__ import annotations

import lightning as L
from lightning.pytorch.cli import LightningCLI


class SciMLCLI(LightningCLI):
    """LightningCLI with sciml's argument links."""

    def add_arguments_to_parser(self, parser) -> None:
        parser.link_arguments("data.init_args.lagtime", "model.init_args.lagtime", apply_on="parse")


def main(args: list[str] | None = None) -> None:
    """Entry point of ``sciml`` and ``python -m sciml``."""
    run(args)


def run(args: list[str] | None = None) -> SciMLCLI:
    """Run the CLI on ``args`` (default: ``sys.argv``) and return it, with its trainer, model and data."""
    return SciMLCLI(
        L.LightningModule,
        L.LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        args=args,
    )
