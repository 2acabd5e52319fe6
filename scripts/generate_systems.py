"""Sample the stochastic systems with exact spectra and save them as ``.npz`` (trajectories + reference).

python scripts/generate_systems.py --out data/systems --seed 0
python scripts/generate_systems.py --out data/systems --seed 0 --systems prinz_fine   # only those named
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from _provenance import write_provenance

from sciml.data.systems import GaussianAR1, NoisyLogisticMap, OrnsteinUhlenbeck, PrinzPotential

SYSTEMS = {
    # name: (system, n_steps, n_trajectories, description)
    "ou": (
        OrnsteinUhlenbeck(theta=1.0, sigma=2**0.5, dt=0.5),
        20_000,
        1,
        "1-D OU, theta 1, sigma sqrt 2, dt 0.5",
    ),
    "ar1": (
        GaussianAR1(M=[[0.8, 0.5], [0.0, 0.5]], Q=[[0.3, 0.0], [0.0, 0.3]]),
        20_000,
        1,
        "non-normal Gaussian AR(1), M = [[.8,.5],[0,.5]], Q = .3 I",
    ),
    "logistic": (NoisyLogisticMap(r=4.0, N=20), 50_000, 1, "noisy logistic map r 4, cos^20 noise"),
    "prinz": (PrinzPotential(dt=0.1), 1000, 100, "Prinz potential, kT 1, gamma 1, dt 0.1 (SqRA chain)"),
    # a lag short enough that eight singular values exceed 1e-2 (the fast modes of the wells are visible)
    "prinz_fine": (PrinzPotential(dt=0.02), 1000, 100, "Prinz potential, kT 1, gamma 1, dt 0.02 (SqRA chain)"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--systems", nargs="+", choices=sorted(SYSTEMS), default=sorted(SYSTEMS))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.systems:
        system, n_steps, n_trajectories, description = SYSTEMS[name]
        states = system.simulate(n_steps, seed=args.seed, n_trajectories=n_trajectories).astype(np.float32)
        path = out / f"{name}.npz"
        np.savez_compressed(
            path,
            trajectories=states,
            singular_values=system.singular_values(1, 10),
            eigenvalues=system.eigenvalues(1, 10),
            dt=system.dt,
        )
        write_provenance(
            path,
            method="exact sampler of sciml.data.systems",
            system=description,
            n_steps=n_steps,
            n_trajectories=n_trajectories,
            seed=args.seed,
            dtype="float32",
            reference="singular_values and eigenvalues at lag 1 (exact)",
        )
        print(f"{name}: {states.shape} -> {path}")


if __name__ == "__main__":
    main()
