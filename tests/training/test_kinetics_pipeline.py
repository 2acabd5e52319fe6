"""``sciml kinetics`` end to end: replicas of a double-well dimer (the replica driver, a torch potential),
a distance-encoder Koopman model, and the report with its error bars, against a direct MSM on the distance."""

from __future__ import annotations

import json

import ase.io
import numpy as np
import pytest
import torch
from ase import Atoms, units

from sciml.commands import kinetics
from sciml.md import MDSettings, run_replicas

TEMPERATURE = 300.0
HEIGHT = 3.5 * units.kB * TEMPERATURE  # barrier, eV
CENTRE, HALF_WIDTH = 1.6, 0.25  # Å: minima at 1.35 and 1.85 Å


def double_well(positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """U(d) = h ((d - c)^2 / w^2 - 1)^2 + 0.3 h (d - c) / w on the C-C distance: the short well deeper."""
    vector = positions[:, 1] - positions[:, 0]
    distance = vector.norm(dim=1)
    x = (distance - CENTRE) / HALF_WIDTH
    energy = HEIGHT * ((x**2 - 1) ** 2 + 0.3 * x)
    slope = HEIGHT * (4 * x * (x**2 - 1) + 0.3) / HALF_WIDTH  # dU/dd
    force = -(slope / distance)[:, None] * vector  # on atom 1
    return energy, torch.stack([-force, force], dim=1)


@pytest.fixture(scope="module")
def replica_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dimer") / "replicas"
    start = Atoms("C2", positions=[[0, 0, 0], [1.35, 0, 0]])
    settings = MDSettings("nvt-langevin", timestep=1.0, steps=12000, temperature=TEMPERATURE, friction=0.02,
                          interval=20, seed=0)  # fmt: skip
    run_replicas(double_well, start, 8, settings, folder)
    return folder


def distances(folder) -> list[np.ndarray]:
    return [np.array([f.get_distance(0, 1) for f in ase.io.read(path, index=":")])
            for path in sorted(folder.glob("replica_*.extxyz"))]  # fmt: skip


def test_sciml_kinetics_reports_timescales_states_and_mfpts_with_error_bars(replica_folder, tmp_path, capsys):
    out = tmp_path / "report"
    numbers = kinetics.main([str(replica_folder), "--output", str(out), "--lag", "5", "--koopman-k", "3",
                             "--koopman-epochs", "5", "--samples", "60", "--microstates", "20",
                             "--compare", str(replica_folder)])  # fmt: skip
    printed = capsys.readouterr().out
    choice, lag = numbers["lag_choice"], numbers["lag"]  # lag 5 or the first converged lag above it
    assert choice["given"] == 5 and lag == choice["lag"] >= 5 and choice["lags"] == numbers["timescales"]["lags"]
    assert f"slowest implied timescale at lag {lag}" in printed and f"lag {lag} (given 5): " in printed
    assert choice["converged"] and choice["ck_passed"][str(lag)] is True, choice["reason"]
    assert f"Model lag {lag} frames (given: 5). {choice['reason']}." in (out / "report.md").read_text()
    # the same trajectories measured in their own states (--compare) give the states' own figures
    compared = numbers["states"]["compared"]
    np.testing.assert_allclose(compared["populations"]["estimate"], numbers["states"]["populations"]["estimate"],
                               rtol=1e-10)  # fmt: skip
    assert compared["sources"] == numbers["sources"] and "The same states in the" in (out / "report.md").read_text()
    for name in ("report.md", "report.html", "report.json", "timescales.png", "chapman_kolmogorov.png",
                 "free_energy.png", "state_0.extxyz", "state_1.extxyz"):  # fmt: skip
        assert (out / name).exists(), name
    assert numbers["time_step"] == pytest.approx(0.02)  # 20 steps of 1 fs, from the frames' time_fs
    assert json.loads((out / "report.json").read_text())["states"]["count"] == 2
    # the reference: a two-state MSM on the distance itself, cut at the barrier, at the same lag
    from deeptime.markov.msm import MaximumLikelihoodMSM

    labels = [(d > CENTRE).astype(np.int32) for d in distances(replica_folder)]
    for at in sorted({5, lag}):  # the lag given and the report's
        msm = MaximumLikelihoodMSM(reversible=True, lagtime=at).fit(labels).fetch_model()
        reference = float(msm.timescales()[0]) * numbers["time_step"]
        index = numbers["timescales"]["lags"].index(at)
        estimate, lower, upper = (numbers["timescales"][key][index][0] for key in ("estimate", "lower", "upper"))
        assert lower < estimate < upper
        print("lag", at, "timescale", estimate, lower, upper, "reference", reference)
        assert estimate == pytest.approx(reference, rel=0.25), (at, estimate, reference)
    # the states are the two wells, the deeper (short) one more populated, as the direct count says
    short = float(np.mean(np.concatenate(labels) == 0))
    states = [ase.io.read(out / f"state_{j}.extxyz", index=":") for j in range(2)]
    mean_distance = [np.mean([f.get_distance(0, 1) for f in frames]) for frames in states]
    j_short = int(np.argmin(mean_distance))
    assert mean_distance[j_short] < CENTRE < mean_distance[1 - j_short]
    assert numbers["states"]["populations"]["estimate"][j_short] == pytest.approx(short, abs=0.08)
    assert numbers["chapman_kolmogorov"]["passed"], numbers["chapman_kolmogorov"]["summary"]


def test_trajectories_without_times_need_a_time_step(tmp_path):
    path = tmp_path / "plain.extxyz"
    ase.io.write(path, [Atoms("C2", positions=[[0, 0, 0], [1.4 + 0.01 * t, 0, 0]]) for t in range(20)])
    with pytest.raises(Exception, match="carry no time_fs; give the time between frames"):
        kinetics.main([str(path), "--output", str(tmp_path / "out")])


def test_the_posterior_draw_of_each_trajectory_is_read_from_its_frames_and_a_partial_record_is_refused():
    from ase import Atoms

    from sciml.data.readers import Trajectory
    from sciml.training.kinetics import posterior_groups

    def trajectory(name: str, draw: int | None) -> Trajectory:
        frame = Atoms("H2", positions=[[0, 0, 0], [0, 0, 0.74]])
        if draw is not None:
            frame.info["posterior_sample"] = draw
        return Trajectory(name, [frame])

    assert posterior_groups([trajectory("a", None), trajectory("b", None)]) is None
    assert posterior_groups([trajectory("a", 1), trajectory("b", 0)]) == [1, 0]
    with pytest.raises(ValueError, match="'b' records no posterior_sample"):
        posterior_groups([trajectory("a", 1), trajectory("b", None)])
