"""Run the notebooks in full mode and store their outputs, so the documentation renders what they computed.

Each notebook in ``notebooks/`` runs top to bottom in a fresh kernel (nbclient; working folder
``notebooks/``; ``SCIML_QUICK`` unset: the long trainings; the figures also written to
``notebooks/figures/``), and is written back with its outputs and ``metadata.sciml``: the hash of its
cells' sources, the run's provenance (command, commit, date, machine, package versions) and its wall time.
The documentation shows those outputs without executing anything (``nb_execution_mode = "off"``).

    python scripts/run_notebooks.py                       # all three: over 45 min on 2 CPU cores
    python scripts/run_notebooks.py notebooks/01_ou_singular_functions.ipynb
    python scripts/run_notebooks.py --quick notebooks/03_molecular_slow_modes.ipynb   # the tests' length
    python scripts/run_notebooks.py --check               # exit 1 if a notebook's outputs are missing,
                                                          # failed or older than its sources (the tests run this)

A notebook edited after its run fails ``--check`` until it is run again: stored outputs cannot drift from
the code above them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from _provenance import run_provenance

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
TIMEOUT_S = 3600  # per cell


def source_hash(notebook: dict) -> str:
    """sha256 of every cell's type and source, in order (outputs and metadata excluded)."""
    cells = [[cell["cell_type"], "".join(cell["source"])] for cell in notebook["cells"]]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def problems(name: str, notebook: dict) -> list[str]:
    """Why the stored outputs of ``notebook`` (read from the file ``name``) are not a complete, successful
    run of its current sources."""
    stamp = notebook["metadata"].get("sciml")
    if stamp is None:
        return [f"{name}: no stored run (metadata.sciml missing)"]
    found = []
    if stamp.get("source_sha256") != source_hash(notebook):
        found.append(f"{name}: edited after its stored run of {stamp.get('date')}")
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    counts = [cell["execution_count"] for cell in code]
    if counts != list(range(1, len(code) + 1)):
        found.append(f"{name}: cells not run once each in order (execution counts {counts})")
    for number, cell in enumerate(code, start=1):
        errors = [output for output in cell["outputs"] if output["output_type"] == "error"]
        if errors:
            found.append(f"{name}: code cell {number} stored an error ({errors[0].get('ename')})")
    return found


def run(path: Path, provenance: dict, quick: bool = False) -> float:
    """Execute ``path`` in full mode (or, with ``quick``, with ``SCIML_QUICK=1``) and write it back with its
    outputs and ``provenance`` (taken before the first notebook runs: the notebooks written by this run would
    mark the checkout dirty); returns the wall seconds."""
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    os.environ.pop("SCIML_QUICK", None)  # the kernel inherits this process's environment
    if quick:
        os.environ["SCIML_QUICK"] = "1"
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend, so the figures are stored
    os.environ["SCIML_FIGURES"] = str(NOTEBOOKS / "figures")
    start = time.perf_counter()
    resources = {"metadata": {"path": str(path.parent)}}
    client = nbclient.NotebookClient(notebook, timeout=TIMEOUT_S, kernel_name="python3", resources=resources)
    client.execute()
    seconds = time.perf_counter() - start
    notebook.metadata["sciml"] = {
        "source_sha256": source_hash(notebook),
        "mode": "quick (SCIML_QUICK=1)" if quick else "full (SCIML_QUICK unset)",
        **provenance,
        "wall_seconds": round(seconds, 1),
    }
    nbformat.write(notebook, path)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in notebooks/")
    parser.add_argument("--check", action="store_true", help="only check the stored outputs; run nothing")
    parser.add_argument("--quick", action="store_true", help="run in quick mode (SCIML_QUICK=1: the tests' length)")
    args = parser.parse_args()
    paths = [path.resolve() for path in args.notebooks] or sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.check:
        found = []
        for path in paths:
            notebook = json.loads(path.read_text())
            stamp = notebook["metadata"].get("sciml", {})
            print(f"{path.name}: stored run {stamp.get('mode', 'none')}, {stamp.get('date')}")
            found += problems(path.name, notebook)
        print("\n".join(found) or f"{len(paths)} notebooks: stored outputs are a run of their current sources")
        if found:
            print("run them again: python scripts/run_notebooks.py", file=sys.stderr)
        return 1 if found else 0
    provenance = run_provenance()
    for path in paths:
        print(f"{path.name}: running ...", flush=True)
        print(f"{path.name}: {run(path, provenance, args.quick) / 60:.1f} min", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
