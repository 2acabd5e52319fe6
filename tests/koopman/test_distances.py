"""DistanceEncoder (inverse heavy-atom distances -> MLP) and the molecular observables (dihedrals, sets):
invariance in float64 to 1e-12, clear errors, dihedrals equal to ASE's and to the data's labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ase.io import read
from e3nn import o3

from sciml.koopman import DistanceEncoder, heavy_atoms
from sciml.koopman.observables import dihedral, dihedral_angles, indicator
from sciml.testing import graph_batch, moved, random_molecule, relative
from tests.conftest import ROOT

NUMBERS = [6, 6, 7, 8, 1, 1, 1]


def encoder(**kwargs) -> DistanceEncoder:
    torch.manual_seed(0)
    return DistanceEncoder(heavy_atoms(NUMBERS), output_dim=3, hidden=(16,), **kwargs).double().eval()


def molecules(seeds=(0, 1)):
    return graph_batch([random_molecule(NUMBERS, seed=s) for s in seeds], cutoff=4.0)


def test_heavy_atoms_and_pairs():
    assert heavy_atoms(NUMBERS) == [0, 1, 2, 3]
    model = encoder()
    assert model.normalise.num_features == 6  # 4 heavy atoms: 6 pairs
    batch = molecules()
    expected = [
        1 / np.linalg.norm(a.positions[0] - a.positions[3]) for a in (random_molecule(NUMBERS, seed=s) for s in (0, 1))
    ]
    pair = [(int(i), int(j)) for i, j in zip(model.first, model.second, strict=True)].index((0, 3))
    np.testing.assert_allclose(model.inverse_distances(batch)[:, pair].numpy(), expected, rtol=1e-12)


def test_invariant_under_rotation_translation_and_reflection():
    model, batch = encoder(), molecules()
    reference = model(batch)
    assert reference.shape == (2, 3) and (reference[0] - reference[1]).abs().max() > 1e-4
    torch.manual_seed(1)
    rotation = o3.rand_matrix(dtype=torch.float64)
    translation = torch.tensor([1.5, -2.0, 0.3], dtype=torch.float64)
    assert relative(model(moved(batch, rotation, translation)), reference) < 1e-12
    assert relative(model(moved(batch, -torch.eye(3, dtype=torch.float64))), reference) < 1e-12


def test_standardises_in_training_and_refuses_mixed_molecules():
    model = encoder().train()
    batch = graph_batch([random_molecule(NUMBERS, seed=s) for s in range(8)], cutoff=4.0)
    standardised = model.normalise(model.inverse_distances(batch))
    np.testing.assert_allclose(standardised.mean(0).detach().numpy(), 0.0, atol=1e-6)
    mixed = graph_batch([random_molecule(NUMBERS, seed=0), random_molecule(NUMBERS[:5], seed=1)], cutoff=4.0)
    with pytest.raises(ValueError, match=r"frames of one molecule.*\[5, 7\] atoms"):
        model(mixed)
    with pytest.raises(ValueError, match="two distinct atom indices"):
        DistanceEncoder([0, 0], output_dim=2)


def test_dihedral_matches_ase_and_the_alanine_labels():
    molecule = random_molecule(NUMBERS, seed=3)
    angle = dihedral_angles(torch.as_tensor(molecule.positions)[None], [0, 1, 2, 3])
    assert abs(np.degrees(float(angle[0])) - ((molecule.get_dihedral(0, 1, 2, 3) + 180) % 360 - 180)) < 1e-9
    frames = read(ROOT / "data" / "alanine_dipeptide_600K.traj", ":40")
    batch = graph_batch(frames, cutoff=3.0)
    phi = np.degrees(dihedral([4, 6, 8, 14])(batch).numpy())
    labels = np.array([(a.info["phi"] + 180) % 360 - 180 for a in frames])
    np.testing.assert_allclose(phi, labels, atol=1e-4)
    positive = indicator(dihedral([4, 6, 8, 14]), 0.0)(batch).numpy()
    assert set(np.unique(positive)) <= {0.0, 1.0}
    np.testing.assert_array_equal(positive, (labels > 0).astype(float))
    with pytest.raises(ValueError, match="four atom indices"):
        dihedral_angles(torch.zeros(1, 4, 3), [0, 1, 2])
