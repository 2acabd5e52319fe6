"""``sciml data prepare``: write a frame store for out-of-core training (:mod:`sciml.data.frame_store`)::

    sciml data prepare --train-paths train.extxyz --val-paths valid.extxyz --test-paths test.extxyz \\
        --energy-key REF_energy --forces-key REF_forces --output runs/data/mydata.h5
    sciml data prepare --paths big_folder/ --split 0.9 0.05 0.05 --split-mode random --output big.h5

then train with ``data.init_args.prepared: big.h5`` instead of ``paths``.
"""

from __future__ import annotations

import argparse
import json
import time

from sciml.commands.options import add_renamed
from sciml.data.labels import LabelKeys, atomic_numbers_of
from sciml.data.prepare import prepare_frame_store


def prepare(
    output: str,
    paths: str | list[str] | None = None,
    train_paths: str | list[str] | None = None,
    val_paths: str | list[str] | None = None,
    test_paths: str | list[str] | None = None,
    split: tuple[float, float, float] = (0.8, 0.1, 0.1),
    split_mode: str = "auto",
    seed: int = 0,
    species: list[str | int] | None = None,
    labels: list[str] | None = None,
    energy_key: str | None = None,
    forces_key: str | None = None,
    stress_key: str | None = None,
    overwrite: bool = False,
) -> dict:
    """Validate and write the frames of trajectory files into one HDF5 frame store.

    Args:
        output: the store to write (``.h5``); refused if it exists, unless ``overwrite``.
        paths: files or folders dealt to the splits by ``split``, ``split_mode`` and ``seed``.
        train_paths: files whole in the training split (with ``val_paths``, ``test_paths``).
        val_paths: files whole in the validation split.
        test_paths: files whole in the test split.
        split: (train, val, test) fractions for ``paths``.
        split_mode: auto, trajectory, contiguous or random (as ``AtomsDataModule``).
        seed: split seed, stored.
        species: elements the model will know (default: those in the data).
        labels: labels every frame must carry (default energy and forces).
        energy_key: atoms.info key of the energy (eV); default: the calculator's results.
        forces_key: atoms.arrays key of the forces (eV/Å).
        stress_key: atoms.info key of the stress (eV/Å^3).
        overwrite: replace an existing output.
    """
    started = time.perf_counter()
    summary = prepare_frame_store(
        output,
        paths,
        train_paths,
        val_paths,
        test_paths,
        split=split,
        split_mode=split_mode,
        seed=seed,
        species=atomic_numbers_of(species) if species else None,
        labels=labels if labels is not None else ["energy", "forces"],
        keys=LabelKeys(energy_key, forces_key, stress_key),
        overwrite=overwrite,
    )
    seconds = time.perf_counter() - started
    frames = sum(summary["frames"].values())
    summary["seconds"], summary["frames_per_s"] = round(seconds, 2), round(frames / max(seconds, 1e-9), 1)
    return summary


def parser() -> argparse.ArgumentParser:
    """``sciml data`` and its subcommand ``prepare`` (kebab-case options; the snake_case ones of 0.2 still work)."""
    parser = argparse.ArgumentParser(prog="sciml data", description="Data preparation for out-of-core training.")
    commands = parser.add_subparsers(dest="command", required=True)
    prepare_parser = commands.add_parser("prepare", help="write an HDF5 frame store from trajectory files",
                                         description=prepare.__doc__.splitlines()[0])  # fmt: skip
    add = prepare_parser.add_argument
    add("--output", required=True, help="the store to write (.h5); refused if it exists, unless --overwrite")
    add("--paths", nargs="+", help="files or folders dealt to the splits by --split, --split-mode and --seed")
    add("--train-paths", nargs="+", help="files whole in the training split")
    add("--val-paths", nargs="+", help="files whole in the validation split")
    add("--test-paths", nargs="+", help="files whole in the test split")
    add("--split", nargs="+", default=["0.8", "0.1", "0.1"], help="train, validation and test fractions of --paths")
    add("--split-mode", default="auto", help="auto, trajectory, contiguous or random (as AtomsDataModule)")
    add("--seed", type=int, default=0, help="split seed, stored")
    add("--species", nargs="+", help="elements the model will know (default: those in the data)")
    add("--labels", nargs="+", help="labels every frame must carry (default energy and forces)")
    add("--energy-key", help="atoms.info key of the energy (eV); default: the calculator's results")
    add("--forces-key", help="atoms.arrays key of the forces (eV/Å)")
    add("--stress-key", help="atoms.info key of the stress (eV/Å^3)")
    add("--overwrite", action="store_true", help="replace an existing output")
    for old in ("train_paths", "val_paths", "test_paths"):
        add_renamed(prepare_parser, f"--{old}", f"--{old.replace('_', '-')}", old, nargs="+")
    add_renamed(prepare_parser, "--split_mode", "--split-mode", "split_mode")
    for old in ("energy_key", "forces_key", "stress_key"):
        add_renamed(prepare_parser, f"--{old}", f"--{old.replace('_', '-')}", old)
    return parser


def split_fractions(values: list[str]) -> tuple[float, float, float]:
    """``--split 0.9 0.05 0.05`` (or, as before 0.3, ``--split [0.9,0.05,0.05]``)."""
    text = " ".join(values).strip("[]() ").replace(",", " ")
    try:
        fractions = tuple(float(value) for value in text.split())
    except ValueError:
        raise SystemExit(f"sciml data prepare: --split takes three fractions, got {values}") from None
    if len(fractions) != 3:
        raise SystemExit(f"sciml data prepare: --split takes three fractions (train, val, test), got {values}")
    return fractions


def main(args: list[str]) -> None:
    """``sciml data prepare ...``."""
    options = vars(parser().parse_args(args))
    options.pop("command")
    options["split"] = split_fractions(options["split"])
    species = options["species"]
    options["species"] = [int(s) if s.isdigit() else s for s in species] if species else None
    print(json.dumps(prepare(**options), indent=2))
