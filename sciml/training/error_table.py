"""Exact error tables of a potential over a whole split, per ``config_type`` and for all frames.

Sums, not per-batch means, are accumulated, so every figure is the one its name says over the split:
energy MAE and RMSE per atom (each frame's |E - E_ref| / N, averaged over frames), force MAE and RMSE per
component (over all atoms: atom-weighted), stress MAE per component, with frame and atom counts. Under
DDP the sums are added across processes before the figures are formed. Units: meV/atom, meV/Å, meV/Å^3.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import torch

ALL = "all"
SUMS = ("frames", "atoms", "energy_frames", "energy_abs", "energy_sq", "force_values", "force_abs", "force_sq")
SUMS += ("stress_values", "stress_abs")
COLUMNS = ("group", "frames", "atoms", "energy_mae", "energy_rmse", "force_mae", "force_rmse", "stress_mae")


class ErrorTable:
    """Accumulate with :meth:`update` batch by batch, :meth:`reduce` across processes, read :meth:`rows`."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}

    def update(self, batch, outputs: dict[str, torch.Tensor]) -> None:
        """Add one evaluated batch (labels absent from the batch are skipped)."""
        n = batch.num_graphs
        per_frame = torch.zeros(n, len(SUMS), dtype=torch.float64, device=batch.pos.device)
        per_frame[:, 0] = 1.0
        per_frame[:, 1] = batch.natoms.double()
        if hasattr(batch, "energy"):
            error = ((outputs["energy"] - batch.energy).double() / batch.natoms.double()).detach()
            per_frame[:, 2], per_frame[:, 3], per_frame[:, 4] = 1.0, error.abs(), error**2
        if hasattr(batch, "forces"):
            error = (outputs["forces"] - batch.forces).double().detach()
            per_frame[:, 5] = 3 * batch.natoms.double()
            per_frame[:, 6].index_add_(0, batch.batch, error.abs().sum(1))
            per_frame[:, 7].index_add_(0, batch.batch, (error**2).sum(1))
        if hasattr(batch, "stress") and "stress" in outputs:
            per_frame[:, 8] = 9.0
            per_frame[:, 9] = (outputs["stress"] - batch.stress).double().detach().abs().flatten(1).sum(1)
        groups = list(getattr(batch, "config_type", None) or [""] * n)
        for group in {*groups, ALL}:
            rows = per_frame if group == ALL else per_frame[[g == group for g in groups]]
            total = self.sums.get(group, torch.zeros(len(SUMS), dtype=torch.float64))
            self.sums[group] = total + rows.sum(0).cpu()

    def reduce(self) -> None:
        """Add the sums of every process (all of them must call it); no-op without torch.distributed."""
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            return
        everyone = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(everyone, self.sums)
        merged: dict[str, torch.Tensor] = {}
        for sums in everyone:
            for group, values in sums.items():
                merged[group] = merged.get(group, torch.zeros(len(SUMS), dtype=torch.float64)) + values
        self.sums = merged

    def rows(self) -> list[dict[str, float | int | str]]:
        """One row per group (``all`` last): counts and errors in meV (NaN where a label was absent)."""
        groups = sorted(g for g in self.sums if g != ALL) + ([ALL] if ALL in self.sums else [])
        return [_row(group, dict(zip(SUMS, self.sums[group].tolist(), strict=True))) for group in groups]

    def markdown(self, title: str) -> str:
        header = "| config_type | frames | atoms | E MAE | E RMSE | F MAE | F RMSE | S MAE |"
        units = "(E: meV/atom, F: meV/Å, S: meV/Å^3)"
        lines = [f"{title} {units}", "", header, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for row in self.rows():
            values = " | ".join(f"{row[c]:.3f}" for c in COLUMNS[3:])
            lines.append(f"| {row['group']} | {row['frames']} | {row['atoms']} | {values} |")
        return "\n".join(lines)

    def write(self, folder: str | Path, stem: str) -> tuple[Path, Path]:
        """``<stem>.csv`` and ``<stem>.json`` in ``folder`` (replaced if present: they describe this run)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(self.rows())
        paths = folder / f"{stem}.csv", folder / f"{stem}.json"
        paths[0].write_text(text.getvalue())
        paths[1].write_text(json.dumps({"units": "meV/atom, meV/Å, meV/Å^3", "rows": self.rows()}, indent=1))
        return paths


def _row(group: str, s: dict[str, float]) -> dict[str, float | int | str]:
    def mean(total: str, count: str) -> float:
        return 1000 * s[total] / s[count] if s[count] else float("nan")

    def root_mean(total: str, count: str) -> float:
        return 1000 * (s[total] / s[count]) ** 0.5 if s[count] else float("nan")

    return {
        "group": group or "(none)",
        "frames": int(s["frames"]),
        "atoms": int(s["atoms"]),
        "energy_mae": mean("energy_abs", "energy_frames"),
        "energy_rmse": root_mean("energy_sq", "energy_frames"),
        "force_mae": mean("force_abs", "force_values"),
        "force_rmse": root_mean("force_sq", "force_values"),
        "stress_mae": mean("stress_abs", "stress_values"),
    }
