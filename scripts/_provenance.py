"""Write ``<file>.provenance.json`` next to a generated dataset: command, seed, method, conditions."""

from __future__ import annotations

import json
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path


def write_provenance(path: str | Path, **fields) -> Path:
    record = {
        "file": Path(path).name,
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        **fields,
    }
    target = Path(f"{path}.provenance.json")
    target.write_text(json.dumps(record, indent=2, default=str) + "\n")
    return target


def run_provenance(packages: tuple[str, ...] = ("torch", "e3nn", "lightning", "ase", "numpy", "sciml")) -> dict:
    """Where and how a benchmark ran: command, UTC time, git commit (``+dirty`` with uncommitted changes),
    CPU model and cores, GPU if any, Python and package versions."""
    import importlib.metadata
    import os
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    commit = git("rev-parse", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += "+dirty"
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor(),
    ) if Path("/proc/cpuinfo").exists() else platform.processor()  # fmt: skip
    versions = {}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    gpu = None
    try:
        import torch

        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        threads = torch.get_num_threads()
    except ImportError:
        threads = None
    return {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "machine": {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": threads, "gpu": gpu},
        "python": platform.python_version(),
        "packages": versions,
    }
