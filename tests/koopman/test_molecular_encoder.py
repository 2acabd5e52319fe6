"""MolecularEncoder: per-structure functions invariant under rotations, translations and permutations
(float64, 1e-10 relative), sensitive to conformation, and trainable end to end on alanine-dipeptide pairs."""

from __future__ import annotations

import numpy as np
import torch
from e3nn import o3

from sciml.data import AtomsDataModule
from sciml.koopman import KoopmanEstimator, MolecularEncoder
from sciml.testing import graph_batch, moved, permuted, random_molecule, relative
from tests.conftest import ROOT

SPECIES = [1, 6, 7, 8]


def canonical_correlations(f: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Singular values of C_ff^{-1/2} C_fg C_gg^{-1/2} (uncentred second moments, Cholesky whitening)."""
    n = f.shape[0]
    whiten_f = np.linalg.inv(np.linalg.cholesky(f.T @ f / n))
    whiten_g = np.linalg.inv(np.linalg.cholesky(g.T @ g / n))
    return np.linalg.svd(whiten_f @ (f.T @ g / n) @ whiten_g.T, compute_uv=False)


def encoder(**kwargs) -> MolecularEncoder:
    torch.manual_seed(0)
    defaults = dict(species=SPECIES, cutoff=4.0, output_dim=3, backbone={"channels": 8, "layers": 2}, hidden=(16,))
    return MolecularEncoder(**{**defaults, **kwargs}).double().eval()


def molecules():
    return graph_batch([random_molecule([6, 6, 7, 8, 1, 1, 1], seed=s) for s in (0, 1)], cutoff=4.0)


def test_rotation_translation_and_permutation_invariance():
    model, batch = encoder(), molecules()
    reference = model(batch)
    assert reference.shape == (2, 3)
    torch.manual_seed(1)
    rotation = o3.rand_matrix(dtype=torch.float64)
    translation = torch.tensor([1.5, -2.0, 0.3], dtype=torch.float64)
    assert relative(model(moved(batch, rotation, translation)), reference) < 1e-10
    permutation = torch.cat([torch.randperm(7, generator=torch.Generator().manual_seed(2)), 7 + torch.arange(7)])
    assert relative(model(permuted(batch, permutation)), reference) < 1e-10


def test_depends_on_conformation_and_pooling():
    model, batch = encoder(), molecules()
    values = model(batch)
    assert (values[0] - values[1]).abs().max() > 1e-4  # two conformations, two feature vectors
    summed = encoder(pooling="sum")
    assert not torch.allclose(summed(batch), values)


def test_estimator_on_alanine_dipeptide_pairs(tmp_path):
    data = AtomsDataModule(
        str(ROOT / "data" / "alanine_dipeptide_600K.traj"), cutoff=4.0, lagtime=2, split=(0.2, 0.05, 0.75)
    )
    model = encoder(species=data.species, cutoff=data.cutoff).float()
    # the pooled features standardised over the training frames, as training leaves them: an untrained
    # backbone's raw features barely move with the conformation (relative variance ~1e-8, under rank_cutoff)
    model.normalise.momentum = None  # cumulative average over every batch
    model.normalise.reset_running_stats()
    with torch.no_grad():
        for x, _ in data.split_dataloader("train"):
            model.train()(x)
    model.eval()
    estimator = KoopmanEstimator(model, lagtime=2).fit(data, observables={"n_atoms": lambda b: b.natoms.double()})
    values = estimator.singular_values
    # independently: features of every training pair (frame t, frame t + 2), canonical correlations by numpy
    f, g = [], []
    with torch.no_grad():
        for x, x_later in data.split_dataloader("train"):
            f.append(model(x).double().numpy())
            g.append(model(x_later).double().numpy())
    f, g = (np.hstack([np.ones((sum(len(b) for b in side), 1)), np.vstack(side)]) for side in (f, g))
    assert f.shape == (len(data.dataset("train")), 4)
    np.testing.assert_allclose(values.numpy(), canonical_correlations(f, g).clip(0.0, 1 - 1e-7), atol=1e-9)
    forecast = estimator.predict(next(iter(data.split_dataloader("val")))[0], steps=2, observable="n_atoms")
    assert torch.allclose(forecast, torch.full_like(forecast, 22.0), atol=1e-6)  # a conserved observable
    estimator.save(tmp_path / "estimator.pt")
    assert torch.equal(KoopmanEstimator.load(tmp_path / "estimator.pt").singular_values, values)
