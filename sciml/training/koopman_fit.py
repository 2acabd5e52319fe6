"""``fit_koopman``: Koopman singular functions from trajectories in one call, without configs::

    from sciml.training import fit_koopman
    estimator = fit_koopman(X, lagtime=2, k=8)                                   # X: (T, d) array(s)
    estimator = fit_koopman("run.traj", lagtime=2, k=6, encoder="molecular")     # ASE trajectory file(s)
    estimator.singular_values, estimator.timescales(time_step=0.1), estimator.predict(x0, 10)

It builds the data module, the encoder, a :class:`~sciml.training.KoopmanModule` with the nested LoRA loss,
trains it with Lightning on the CPU (or ``accelerator``) and returns the
:class:`~sciml.koopman.KoopmanEstimator` fitted on the training split (its ``lagtime`` is the data's). For
anything beyond, use ``sciml fit --config``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import ase.io
import lightning as L
import torch

from sciml.data import ArrayDataModule, AtomsDataModule
from sciml.koopman import DistanceEncoder, KoopmanEstimator, LoRALoss, MLPEncoder, MolecularEncoder, select_atoms
from sciml.training.koopman_module import KoopmanModule

ENCODERS = ("mlp", "molecular", "distances")


def fit_koopman(
    data,
    lagtime: int = 1,
    k: int = 8,
    encoder: str | None = None,
    epochs: int = 20,
    batch_size: int | None = None,
    lr: float = 1e-3,
    loss: torch.nn.Module | None = None,
    cutoff: float = 5.0,
    seed: int = 0,
    encoder_options: dict | None = None,
    trainer_options: dict | None = None,
    share_encoders: bool = False,
) -> KoopmanEstimator:
    """Train k singular functions (the constant included) at ``lagtime`` frames and return the estimator.

    Args:
        data: state trajectories, one (T, d) array / tensor or a list of them (split into train / val / test
            80/10/10 without crossing trajectories), or the path(s) of ASE trajectory files (.traj, extxyz).
        encoder: ``"mlp"`` (states; default for arrays: MLP 64-64), ``"molecular"`` (atom positions: the
            E2Former backbone, invariant; default for files) or ``"distances"`` (an MLP on the inverse
            distances between the atoms ``encoder_options["atoms"]`` picks in the first frame, default the heavy
            atoms: see :func:`~sciml.koopman.distances.select_atoms`; frames of one molecule).
        epochs: training epochs.
        batch_size: pairs per batch (default 256 for arrays, 32 for files).
        lr: Adam's learning rate.
        loss: the Koopman loss (default nested LoRA, joint nesting).
        cutoff: neighbour radius in Å (molecular encoder).
        seed: seed of the split, the weights and the batches.
        encoder_options: keyword arguments of the encoder.
        trainer_options: extra ``lightning.Trainer`` arguments.
        share_encoders: one encoder for f and g (reversible dynamics sampled at equilibrium, e.g. molecular
            dynamics: left and right singular functions coincide, and the eigenvalues follow the singular
            values); default two encoders.
    """
    files = isinstance(data, str | Path) or (isinstance(data, list | tuple) and isinstance(data[0], str | Path))
    encoder = encoder or ("molecular" if files else "mlp")
    if encoder not in ENCODERS:
        raise ValueError(f"unknown encoder '{encoder}'; choose one of {ENCODERS}")
    if k < 2:
        raise ValueError(f"k counts the constant function: at least 2, got {k}")
    L.seed_everything(seed, verbose=False)
    options = dict(encoder_options or {})
    if files:
        paths = [str(p) for p in ([data] if isinstance(data, str | Path) else data)]
        module_data = AtomsDataModule(paths, cutoff=cutoff, lagtime=lagtime, batch_size=batch_size or 32, seed=seed,
                                      cache_graphs=encoder == "distances")  # small graphs, built once  # fmt: skip
    else:
        module_data = ArrayDataModule(states=data, lagtime=lagtime, batch_size=batch_size or 256, seed=seed)
    if encoder != "mlp" and not files:
        raise ValueError(f"the {encoder} encoder needs ASE trajectory files")
    if encoder == "molecular":
        network = MolecularEncoder(module_data.species, module_data.cutoff, k - 1, **options)
    elif encoder == "distances":
        first = ase.io.read(paths[0], index=0)
        atoms = select_atoms(first.numbers, first.positions, options.pop("atoms", "heavy"))
        network = DistanceEncoder(atoms, k - 1, **options)
    else:
        if files:
            raise ValueError("the mlp encoder needs state arrays; for trajectory files use encoder='molecular'")
        network = MLPEncoder(module_data.trajectories[0].shape[1], k - 1, **options)
    optimizer = partial(torch.optim.Adam, lr=lr)
    model = KoopmanModule(
        network, share_encoders=share_encoders, loss=loss or LoRALoss(), optimizer=optimizer, lagtime=lagtime
    )
    settings = {"max_epochs": epochs, "accelerator": "cpu", "logger": False, "enable_checkpointing": False}
    settings |= {"enable_progress_bar": False, "enable_model_summary": False, **(trainer_options or {})}
    L.Trainer(**settings).fit(model, module_data)
    return KoopmanEstimator.from_module(model).fit(module_data)
