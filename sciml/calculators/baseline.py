"""A cheap method under a learned difference: a checkpoint whose model learned expensive - cheap (energy eV, forces
eV/Å) names the cheap method, and its energy and forces are the method's plus the model's (Δ-learning:
Ramakrishnan, Dral, Rupp, von Lilienfeld, J. Chem. Theory Comput. 11, 2087 (2015)).

The method is stored in the checkpoint as a plain dict (``BASELINE_KEY``: ``{"method": "GFN2-xTB", "accuracy":
1.0, "electronic_temperature": 300.0}``), read with ``weights_only=True`` like the rest, and rebuilt as an ASE
calculator by :func:`baseline_calculator`. :class:`~sciml.calculators.SciMLCalculator` adds it at every call;
the paths that run the model alone (the replica driver, the metatomic export) refuse such a checkpoint
(:func:`~sciml.calculators.checkpoint.load_model`), since the model alone is only the difference.
"""

from __future__ import annotations

from pathlib import Path

import torch
from ase.calculators.calculator import Calculator

from sciml.nn.checkpoint import CheckpointError, read_checkpoint

BASELINE_KEY = "sciml_baseline"

#: The methods a checkpoint may name as its baseline, with their options (and defaults).
METHODS = {"GFN2-xTB": {"accuracy": 1.0, "electronic_temperature": 300.0}}


def baseline_spec(method: str, **options) -> dict:
    """The stored form of ``method`` (one of ``METHODS``) with ``options`` (the rest at their defaults)."""
    if method not in METHODS:
        raise ValueError(f"unknown baseline method '{method}'; choose one of {sorted(METHODS)}")
    unknown = sorted(set(options) - set(METHODS[method]))
    if unknown:
        raise ValueError(f"baseline {method}: unknown options {unknown}; it takes {sorted(METHODS[method])}")
    return {"method": method, **METHODS[method], **options}


def baseline_calculator(spec: dict) -> Calculator:
    """A fresh ASE calculator of the stored method ``spec`` (GFN2-xTB: tblite's; electronic temperature in K)."""
    method = spec.get("method")
    if method != "GFN2-xTB":
        raise CheckpointError(f"baseline method '{method}' is not one sciml can run (it runs {sorted(METHODS)})")
    try:
        from tblite.ase import TBLite
    except ImportError as error:
        raise ImportError("the GFN2-xTB baseline needs tblite: pip install tblite") from error
    return TBLite(method="GFN2-xTB", accuracy=spec["accuracy"], electronic_temperature=spec["electronic_temperature"],
                  verbosity=0)  # fmt: skip


def write_baseline(path: str | Path, spec: dict) -> Path:
    """Mark the checkpoint ``path`` as a difference to the method ``spec`` (rewritten through a temporary file, so
    an interrupted write leaves the old file whole)."""
    path = Path(path)
    checkpoint = read_checkpoint(path)
    checkpoint[BASELINE_KEY] = baseline_spec(spec["method"], **{k: v for k, v in spec.items() if k != "method"})
    temporary = path.with_name(f".{path.name}.partial")
    torch.save(checkpoint, temporary)
    temporary.replace(path)
    return path
