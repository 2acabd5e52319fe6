"""One validated frame -> a PyG ``Data`` graph. ``Batch.from_data_list`` makes the flat graph batch.

Fields (units Å, eV, eV/Å, eV/Å^3): ``pos (N,3)``, ``numbers (N,)``, ``cell (1,3,3)``, ``pbc (1,3)``,
``edge_index (2,E)`` and ``shifts (E,3)`` as defined in :mod:`sciml.data.neighbours`, ``natoms (1,)``,
``config_type`` (str, "" when the frame has none) and the labels present: ``energy (1,)``,
``forces (N,3)``, ``stress (1,3,3)``. After batching, ``batch (N,)`` maps atoms to structures,
``cell``/``pbc``/``energy``/``stress`` gain a leading structure axis and ``config_type`` is a list.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Batch, Data

from sciml.data.labels import read_frame
from sciml.data.neighbours import radius_graph


def frame_to_graph(
    record: dict[str, np.ndarray],
    cutoff: float,
    dtype: torch.dtype | None = None,
    backend: str = "vesin",
) -> Data:
    """Graph of one record from :func:`sciml.data.labels.read_frame` (``dtype`` defaults to torch's)."""
    dtype = dtype or torch.get_default_dtype()
    pos = torch.as_tensor(record["positions"], dtype=dtype)
    cell = torch.as_tensor(record["cell"], dtype=dtype)
    pbc = torch.as_tensor(record["pbc"], dtype=torch.bool)
    edge_index, shifts = radius_graph(pos, cell, pbc, cutoff, backend=backend)
    graph = Data(
        pos=pos,
        numbers=torch.as_tensor(record["numbers"], dtype=torch.int64),
        cell=cell[None],
        pbc=pbc[None],
        edge_index=edge_index,
        shifts=shifts.to(dtype),
        natoms=torch.tensor([pos.shape[0]]),
    )
    graph.config_type = record.get("config_type", "")  # a list of str after batching (error tables group by it)
    if "energy" in record:
        graph.energy = torch.as_tensor(record["energy"], dtype=dtype).reshape(1)
    if "forces" in record:
        graph.forces = torch.as_tensor(record["forces"], dtype=dtype)
    if "stress" in record:
        graph.stress = torch.as_tensor(record["stress"], dtype=dtype)[None]
    return graph


def trajectory_graphs(trajectory, cutoff: float, chunk: int = 512, dtype: torch.dtype | None = None) -> list:
    """The frames of a :class:`~sciml.data.readers.Trajectory` as PyG batches of at most ``chunk`` graphs, in
    order (what a Koopman estimator's encoders take, chunk by chunk)."""
    graphs = [frame_to_graph(read_frame(atoms, trajectory.source, t), cutoff, dtype)
              for t, atoms in enumerate(trajectory.frames)]  # fmt: skip
    return [Batch.from_data_list(graphs[start : start + chunk]) for start in range(0, len(graphs), chunk)]
