"""``sciml data prepare``: write a frame store for out-of-core training (:mod:`sciml.data.frame_store`)::

    sciml data prepare --train_paths train.extxyz --val_paths valid.extxyz --test_paths test.extxyz \\
        --energy_key REF_energy --forces_key REF_forces --output runs/data/mydata.h5
    sciml data prepare --paths big_folder/ --split [0.9,0.05,0.05] --split_mode random --output big.h5

then train with ``data.init_args.prepared: big.h5`` instead of ``paths``.
"""

from __future__ import annotations

import json
import time

from jsonargparse import ArgumentParser

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
        split,
        split_mode,
        seed,
        atomic_numbers_of(species) if species else None,
        labels if labels is not None else ["energy", "forces"],
        LabelKeys(energy_key, forces_key, stress_key),
        overwrite,
    )
    seconds = time.perf_counter() - started
    frames = sum(summary["frames"].values())
    summary["seconds"], summary["frames_per_s"] = round(seconds, 2), round(frames / max(seconds, 1e-9), 1)
    return summary


def main(args: list[str]) -> None:
    """``sciml data prepare ...``."""
    parser = ArgumentParser(prog="sciml data", description="Data preparation for out-of-core training.")
    commands = parser.add_subcommands()
    prepare_parser = ArgumentParser(description=prepare.__doc__.splitlines()[0])
    prepare_parser.add_function_arguments(prepare, as_group=False)
    commands.add_subcommand("prepare", prepare_parser, help="write an HDF5 frame store from trajectory files")
    config = parser.parse_args(args)
    arguments = config.prepare.as_dict()
    arguments.pop("__path__", None)
    print(json.dumps(prepare(**arguments), indent=2))
