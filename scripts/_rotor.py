"""Ethanol's hydroxyl rotor in ``bench_kinetics.py``: the C-C-O-H dihedral of frames, the training frames
spread over it, the rotor's wells and transitions, and its relaxed energy profile under a calculator.

Under GFN2-xTB the profile (relaxed scan, 10° steps) has gauche wells at ±60°, trans 66 meV above them at 180°,
the gauche -> trans barrier 108 meV at ±130° and the gauche+ <-> gauche- barrier 56 meV at 0° (cis): at 300 K
frames near the gauche -> trans barrier are rare, and a potential trained on frames taken evenly in time sees
few of the configurations that set the rate of the slow process.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from ase import Atoms

ROTOR = (0, 1, 2, 8)  # C-C-O-H in RDKit's order for CCO with hydrogens added


def dihedrals(frames: Sequence[Atoms]) -> np.ndarray:
    """The C-C-O-H dihedral of each frame in degrees, in (-180, 180]."""
    import torch  # here: rotor_profile also runs in MACE's environment, which has no sciml

    from sciml.koopman.observables import dihedral_angles

    positions = torch.as_tensor(np.stack([frame.positions for frame in frames]))
    return np.degrees(dihedral_angles(positions, ROTOR).numpy())


def spread_over_rotor(frames: Sequence[Atoms], count: int, spread_fraction: float, bins: int = 36) -> list[int]:
    """Indices of ``count`` frames: ``1 - spread_fraction`` of them evenly in time, the rest taken in turn from
    ``bins`` equal bins of the dihedral (a random frame of each bin that still has one, seeded), so that the
    barrier regions the kinetics depend on are in the training set. Sorted, without repeats."""
    even = int(round(count * (1 - spread_fraction)))
    chosen = set(np.linspace(0, len(frames) - 1, even).round().astype(int).tolist())
    rng = np.random.default_rng(0)
    members = np.digitize(dihedrals(frames), np.linspace(-180, 180, bins + 1)[1:-1])
    pools = [[int(i) for i in rng.permutation(np.flatnonzero(members == b)) if i not in chosen] for b in range(bins)]
    while len(chosen) < min(count, len(frames)):
        for pool in pools:
            if pool and len(chosen) < count:
                chosen.add(pool.pop())
    return sorted(chosen)


def rotor_populations(trajectories: Sequence[Sequence[Atoms]]) -> dict:
    """Fraction of frames with |C-C-O-H| > 120 degrees (trans) over all trajectories, and transitions counted
    between the trans and gauche wells (a change of well that holds for 5 frames)."""
    trans, transitions, frames = 0, 0, 0
    for trajectory in trajectories:
        well = np.abs(dihedrals(trajectory)) > 120
        trans += int(well.sum())
        frames += len(well)
        current = well[0]
        for t in range(len(well) - 5):
            if well[t] != current and np.all(well[t : t + 5] == well[t]):
                transitions, current = transitions + 1, well[t]
    return {"trans_fraction": trans / frames, "transitions": transitions, "frames": frames}


def rotor_profile(
    start: Atoms, calculator, angles: Sequence[float] = tuple(range(0, 181, 10)), fmax: float = 0.01
) -> dict:
    """Relaxed scan of the dihedral: at each angle (degrees, 10° steps by default) the structure relaxed (BFGS
    to ``fmax`` eV/Å) with the dihedral held (``FixInternals``), continuing from the previous angle's structure.
    Returns the angles, the energies relative to the lowest (meV), the gauche -> trans barrier and the
    trans - gauche difference (meV)."""
    from ase.constraints import FixInternals
    from ase.optimize import BFGS

    atoms, energies = start.copy(), []
    for angle in angles:
        atoms.set_constraint()
        atoms.set_dihedral(*ROTOR, angle, indices=[ROTOR[-1]])
        atoms.set_constraint(FixInternals(dihedrals_deg=[[atoms.get_dihedral(*ROTOR), list(ROTOR)]]))
        atoms.calc = calculator
        BFGS(atoms, logfile=None).run(fmax=fmax, steps=300)
        energies.append(atoms.get_potential_energy())
    relative = 1e3 * (np.array(energies) - min(energies))
    angles = np.asarray(angles, dtype=float)
    gauche = relative[np.argmin(np.abs(angles - 60))]
    trans = relative[np.argmin(np.abs(angles - 180))]
    between = (angles > 60) & (angles < 180)
    return {"angles": angles.tolist(), "energies_mev": relative.tolist(),
            "barrier_gauche_to_trans_mev": float(relative[between].max() - gauche),
            "trans_minus_gauche_mev": float(trans - gauche)}  # fmt: skip
