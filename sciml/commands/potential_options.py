"""Options shared by the commands that run a trained potential (``sciml md``, ``sciml serve``)."""

from __future__ import annotations

import argparse

import ase.io
from ase import Atoms

from sciml.calculators import SciMLCalculator
from sciml.calculators.inference import MODES
from sciml.commands.options import add_index, add_precision, add_renamed


def add_potential_arguments(parser: argparse.ArgumentParser, structure_help: str) -> None:
    """``--checkpoint``, ``--structure``, ``--index``, ``--dtype``, ``--device``, ``--skin``, ``--compile``,
    ``--static-shapes`` and ``--require-uncertainty``."""
    add = parser.add_argument
    add("--checkpoint", required=True, help="a sciml fit checkpoint (.ckpt)")
    add("--structure", required=True, help=structure_help)
    add_index(parser)
    add_precision(parser)
    add("--skin", type=float, default=0.5, help="neighbour-list skin, Å")
    add("--compile", nargs="?", const="layers", default="auto", choices=MODES,
        help="inference path: auto (default) the ahead-of-time program of the model's energy and forces where "
             "it serves (built once per model and cached, ~100 s for the medium model on 2 cores; "
             "SCIML_COMPILE=0 skips it), aot (that or an error), layers (torch.compile of the layers; --compile "
             "alone), eager")  # fmt: skip
    add(
        "--static-shapes",
        action="store_true",
        help="fixed-capacity neighbour buffers (with --compile on a CUDA device: CUDA graphs)",
    )
    add(
        "--require-uncertainty",
        action="store_true",
        help="require the checkpoint's uncertainty estimate (a committee or a last-layer model; an error without)",
    )
    add_renamed(parser, "--uncertainty", "--require-uncertainty", "require_uncertainty", flag=True)


def structure_and_calculator(options: argparse.Namespace) -> tuple[Atoms, SciMLCalculator]:
    """The chosen frame (without its stored calculator) and the checkpoint's calculator."""
    atoms = ase.io.read(options.structure, index=options.index)
    atoms.calc = None
    calculator = SciMLCalculator.from_checkpoint(
        options.checkpoint,
        options.device,
        options.dtype,
        options.skin,
        compile=options.compile,
        static_shapes=options.static_shapes,
        uncertainty=True if options.require_uncertainty else None,
        expected_calls=getattr(options, "steps", None),  # sciml md's run length (sciml serve has none)
    )
    return atoms, calculator
