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
