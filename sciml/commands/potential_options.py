"""Options shared by the commands that run a trained potential (``sciml md``, ``sciml serve``)."""

from __future__ import annotations

import argparse

import ase.io
from ase import Atoms

from sciml.calculators import SciMLCalculator


def add_potential_arguments(parser: argparse.ArgumentParser, structure_help: str) -> None:
    """``--checkpoint``, ``--structure``, ``--index``, ``--dtype``, ``--device``, ``--skin``, ``--compile``,
    ``--static-shapes`` and ``--uncertainty``."""
    add = parser.add_argument
    add("--checkpoint", required=True, help="a sciml fit checkpoint (.ckpt)")
    add("--structure", required=True, help=structure_help)
    add("--index", type=int, default=0, help="frame of --structure (default 0)")
    add("--dtype", default="float64", choices=["float32", "float64"])
    add("--device", default="cpu")
    add("--skin", type=float, default=0.5, help="neighbour-list skin, Å")
    add("--compile", action="store_true", help="torch.compile the model's layers (the first step compiles)")
    add(
        "--static-shapes",
        action="store_true",
        help="fixed-capacity neighbour buffers (with --compile on a CUDA device: CUDA graphs)",
    )
    add(
        "--uncertainty",
        action="store_true",
        help="require the checkpoint's uncertainty estimate (a committee; an error without one)",
    )


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
        uncertainty=True if options.uncertainty else None,
    )
    return atoms, calculator
