"""MACE, the peer of ``bench_accuracy.py``: its environment, training in float32 or float64 on the aspirin
files, and its learning curve (validation force MAE against wall-clock minutes) from its own logs.

MACE 0.3.16 (64x0e + 64x1o, L = 1, 2 interactions, correlation 3, r_max 5 Å; EMA 0.99, AMSGrad, lr 0.01,
SWA stage from 80 % of the epochs with energy weight 1000, forces 100) runs in its own virtual environment
under ``~/.cache/sciml/envs/mace-0.3.16`` (it pins e3nn 0.4.4), created on first use.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import ase.io

MACE_ENV = Path.home() / ".cache" / "sciml" / "envs" / "mace-0.3.16"
DTYPES = ("float32", "float64")


def mace_python() -> Path:
    """The Python of MACE's environment (created with ``torch==2.13.0`` and ``mace-torch==0.3.16``)."""
    python = MACE_ENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(MACE_ENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "torch==2.13.0", "mace-torch==0.3.16"], check=True)
    return python


def mace_files(data: Path, names: list[str], out: Path) -> dict[str, Path]:
    """The data files with labels under REF_energy / REF_forces, as MACE reads them."""
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name in names:
        frames = ase.io.read(data / name, index=":")
        for atoms in frames:
            atoms.info["REF_energy"] = atoms.get_potential_energy()
            atoms.arrays["REF_forces"] = atoms.get_forces()
            atoms.calc = None
        files[name] = out / name
        ase.io.write(files[name], frames, format="extxyz")
    return files


def _stamps(log: Path) -> list[tuple[datetime, str]]:
    return [
        (datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f"), line)
        for line in log.read_text().splitlines()
        if "INFO: Started training" in line or "INFO: Epoch " in line
    ]


def mace_training_seconds(log: Path) -> float:
    """From MACE's log: 'Started training' to the last 'Epoch n:' line (MACE then evaluates every stage on
    the full training and validation sets, which is not training and is not counted)."""
    stamps = _stamps(log)
    return (stamps[-1][0] - stamps[0][0]).total_seconds()


def _epoch_seconds(log: Path) -> list[float]:
    """Seconds from 'Started training' to each 'Epoch n:' line of MACE's log."""
    stamps = _stamps(log)
    return [(t - stamps[0][0]).total_seconds() for t, line in stamps if "INFO: Epoch " in line]


def epochs_in_budget(seconds: list[float], budget_s: float) -> int:
    """The epochs that fit in ``budget_s`` after a probe of two, from the training clock at the end of each
    (``seconds``, from fit start): the first epoch, then the steady time per epoch. E2Former's probe is read
    the same way, so both models train for the same time."""
    first, second = seconds[:2]
    return max(2, 1 + int((budget_s - first) / (second - first)))


def mace_curve(log: Path, results: Path) -> list[dict]:
    """``[{epoch, minutes, force_mae_mev_per_a}]``: each validation of the run (MACE's JSON-lines results
    file ``*_train.txt``, ``mode: eval`` with an epoch: the evaluation before training has none) at the
    wall-clock minutes its 'Epoch n:' log line was written."""
    evaluations = []
    for path in sorted(results.glob("*_train.txt")):
        for line in path.read_text().splitlines():
            record = json.loads(line) if line.startswith("{") else {}
            if record.get("mode") == "eval" and "mae_f" in record and record.get("epoch") is not None:
                evaluations.append(record)
    return [
        {
            "epoch": int(record["epoch"]),
            "minutes": seconds / 60,
            "force_mae_mev_per_a": 1e3 * record["mae_f"],
        }
        for record, seconds in zip(evaluations, _epoch_seconds(log), strict=False)
    ]


def train_mace(
    files: dict[str, Path],
    out: Path,
    budget_s: float,
    epochs: int | None,
    dtype: str,
    timed: Callable,
    train: str = "train_500K.extxyz",
    valid: str = "valid_500K.extxyz",
    seed: int = 0,
) -> tuple[Path, int, float, list[dict]]:
    """Train MACE in ``dtype`` on ``files[train]`` (validated on ``files[valid]``) for ``epochs`` (or as many as
    a two-epoch probe says fit in ``budget_s``, :func:`epochs_in_budget`); returns the final (SWA-stage) model
    file, the epochs, the training seconds and the learning curve (``seed``: MACE's training seed)."""
    if dtype not in DTYPES:
        raise ValueError(f"MACE dtype must be one of {DTYPES}, got {dtype!r}")
    out.mkdir(parents=True, exist_ok=True)
    python = mace_python()
    command = [str(python.parent / "mace_run_train"), "--name", "mace", "--seed", str(seed), "--device", "cpu"]
    command += ["--train_file", str(files[train]), "--valid_file", str(files[valid])]
    command += ["--energy_key", "REF_energy", "--forces_key", "REF_forces", "--E0s", "average"]
    command += ["--model", "MACE", "--hidden_irreps", "64x0e + 64x1o", "--num_interactions", "2"]
    command += ["--correlation", "3", "--r_max", "5.0", "--batch_size", "8", "--valid_batch_size", "32"]
    command += ["--lr", "0.01", "--amsgrad", "--ema", "--ema_decay", "0.99", "--default_dtype", dtype]
    command += ["--energy_weight", "1.0", "--forces_weight", "100.0", "--eval_interval", "1"]
    command += ["--error_table", "PerAtomMAE"]

    def run(n_epochs: int, folder: Path, log: Path) -> float:
        folder.mkdir(parents=True, exist_ok=True)
        dirs = [f"--{kind}_dir={folder / kind}" for kind in ("model", "log", "checkpoints", "results")]
        swa = ["--swa", "--start_swa", str(max(1, int(0.8 * n_epochs)))] if n_epochs > 1 else []
        return timed([*command, *dirs, "--max_num_epochs", str(n_epochs), *swa], log, cwd=folder)

    if epochs is None:
        run(2, out / "probe", out / "probe.log")
        epochs = epochs_in_budget(_epoch_seconds(out / "probe.log"), budget_s)
    run(epochs, out / "run", out / "train.log")
    seconds = mace_training_seconds(out / "train.log")
    models = sorted((out / "run" / "model").glob("*.model"))
    models = [m for m in models if "compiled" not in m.name]
    chosen = next((m for m in models if "swa" in m.name or "stagetwo" in m.name), models[0])
    return chosen, epochs, seconds, mace_curve(out / "train.log", out / "run" / "results")
