"""Alanine dipeptide slow modes for ``bench_koopman.py``: learned encoders on atom positions against a deeptime
MSM and a linear VAMP on the backbone dihedrals, on the same frames and lag.

Data: ``data/alanine_dipeptide_600K.traj`` (2000 frames, 5 ps apart), contiguous 80/10/10 split, lag 2 frames
(10 ps). For each encoder: in-sample and held-out (test block) leading non-trivial singular value, held-out
VAMP-E, the slowest implied timescale against the MSM's (k-means on (cos, sin) of phi and psi, training frames,
same lag), a Chapman-Kolmogorov test of the set phi > 0 (starts in phi > 0 and phi < 0, 4 lags, tolerance
0.05) and |corr(eigenfunction 2, sign phi)| over all frames.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import lightning as L
import numpy as np
import torch
from ase.io import read
from torch import nn

from sciml.data import AtomsDataModule
from sciml.koopman import DistanceEncoder, KoopmanEstimator, LoRALoss, MolecularEncoder, heavy_atoms
from sciml.koopman.kinetics import chapman_kolmogorov, lagged_pairs
from sciml.koopman.observables import dihedral, indicator
from sciml.training import KoopmanModule

PATH = Path(__file__).resolve().parents[1] / "data" / "alanine_dipeptide_600K.traj"
FRAME_PS, LAG, SPLIT = 5.0, 2, (0.8, 0.1, 0.1)
PHI_ATOMS = [4, 6, 8, 14]  # from the data's provenance file


def data_at(lag: int, batch_size: int = 64) -> AtomsDataModule:
    return AtomsDataModule(str(PATH), cutoff=5.0, lagtime=lag, split=SPLIT, batch_size=batch_size, seed=0)


def dihedrals() -> tuple[np.ndarray, np.ndarray]:
    """(phi, psi) in radians, in (-pi, pi], for every frame, from the trajectory's labels."""
    frames = read(PATH, ":")
    return tuple(np.angle(np.exp(1j * np.radians([a.info[name] for a in frames]))) for name in ("phi", "psi"))


def dihedral_features(phi: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """(T, 4) (cos, sin)(phi, psi): what the MSM clusters and the linear VAMP is fitted on."""
    return np.stack([np.cos(phi), np.sin(phi), np.cos(psi), np.sin(psi)], axis=1)


def msm_timescale(phi: np.ndarray, psi: np.ndarray, n_train: int, clusters: int = 100) -> float:
    """Slowest implied timescale (ps) of a reversible deeptime MSM on k-means of (cos, sin)(phi, psi)."""
    from deeptime.clustering import KMeans
    from deeptime.markov import TransitionCountEstimator
    from deeptime.markov.msm import MaximumLikelihoodMSM

    features = dihedral_features(phi, psi)[:n_train]
    states = KMeans(clusters, fixed_seed=13, n_jobs=1).fit(features).fetch_model().transform(features)
    counts = TransitionCountEstimator(LAG, "sliding").fit(states).fetch_model().submodel_largest()
    return float(MaximumLikelihoodMSM(reversible=True).fit(counts).fetch_model().timescales(1)[0] * FRAME_PS)


def dihedral_vamp(phi: np.ndarray, psi: np.ndarray, n_train: int, test: slice) -> dict[str, float]:
    """Linear VAMP on (cos, sin)(phi, psi) (our estimator with identity features = deeptime's VAMP)."""
    features = torch.as_tensor(dihedral_features(phi, psi))
    estimator = KoopmanEstimator(nn.Identity(), nn.Identity(), lagtime=LAG)
    estimator.fit(lagged_pairs(features[:n_train], LAG))
    held_out = lagged_pairs(features[test], LAG)
    return {
        "sigma2": float(estimator.singular_values[1]),
        "sigma2_heldout": float(estimator.held_out_singular_values(held_out)[1]),
        "vampe_heldout": estimator.score(held_out)["vampe"],
        "its_ps": float(estimator.timescales(FRAME_PS)[1]),
    }


def make_encoder(kind: str, data: AtomsDataModule, output_dim: int) -> nn.Module:
    if kind == "e2former":
        return MolecularEncoder(data.species, data.cutoff, output_dim, backbone={"channels": 32, "layers": 2})
    return DistanceEncoder(heavy_atoms(read(PATH, index=0).numbers), output_dim, hidden=(64, 64))


def train(
    kind: str, epochs: int, lr: float = 1e-3, k: int = 6, seed: int = 0
) -> tuple[KoopmanEstimator, AtomsDataModule, float]:
    """Nested LoRA (joint nesting) with Adam and one encoder for f and g (the dynamics are reversible and the
    frames at equilibrium, so left and right singular functions coincide); returns the estimator on the
    training split, the data module (lag ``LAG``) and the training seconds."""
    L.seed_everything(seed, verbose=False)
    data = data_at(LAG)
    data.setup("fit")
    encoder = make_encoder(kind, data, k - 1)
    module = KoopmanModule(encoder, share_encoders=True, loss=LoRALoss(), optimizer=partial(torch.optim.Adam, lr=lr))
    start = time.perf_counter()
    quiet = {"enable_checkpointing": False, "enable_progress_bar": False, "enable_model_summary": False}
    L.Trainer(max_epochs=epochs, accelerator="cpu", logger=False, **quiet).fit(module, data)
    seconds = time.perf_counter() - start
    return KoopmanEstimator.from_module(module).fit(data), data, seconds


def evaluate(estimator: KoopmanEstimator, data: AtomsDataModule, phi: np.ndarray, msm_ps: float) -> dict[str, float]:
    """Scores of a trained ``estimator`` against the MSM's timescale ``msm_ps``; ``data``: pairs at ``LAG``."""
    held_out = estimator.held_out_singular_values(data, "test")
    phi_positive = indicator(dihedral(PHI_ATOMS), 0.0)
    ck = chapman_kolmogorov(
        estimator,
        data_at,
        {"phi > 0": phi_positive},
        steps=4,
        weights={"phi > 0": phi_positive, "phi < 0": lambda b: 1 - phi_positive(b)},
    )
    frames = AtomsDataModule(str(PATH), cutoff=5.0, lagtime=None, split=SPLIT, predict_paths=str(PATH))
    values = torch.cat([estimator.eigenfunctions(batch) for batch in frames.predict_dataloader()])[:, 1].real
    its = float(estimator.timescales(FRAME_PS)[1])
    return {
        "sigma2": float(estimator.singular_values[1]),
        "sigma2_heldout": float(held_out[1]),
        "vampe_heldout": estimator.score(data, "test")["vampe"],
        "its_ps": its,
        "its_ratio": its / msm_ps,
        "ck_max_err": float(ck.errors.max()),
        "ck_passed": float(ck.passed),
        "corr_sign_phi": float(abs(np.corrcoef(values.numpy(), np.sign(phi))[0, 1])),
    }
