"""Ethanol's hydroxyl rotor in ``bench_kinetics.py``: the C-C-O-H dihedral of frames, the training frames
spread over it, the rotor's wells and transitions, and its relaxed energy profile under a calculator; and the
relaxed torsion scans of ``bench_dft.py``'s molecules (``TORSIONS``, ``torsion_scan``).

Under GFN2-xTB the profile (relaxed scan, 10° steps) has gauche wells at ±60°, trans 66 meV above them at 180°,
the gauche -> trans barrier 108 meV at ±130° and the gauche+ <-> gauche- barrier 56 meV at 0° (cis): at 300 K
frames near the gauche -> trans barrier are rare, and a potential trained on frames taken evenly in time sees
few of the configurations that set the rate of the slow process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from ase import Atoms

ROTOR = (0, 1, 2, 8)  # C-C-O-H in RDKit's order for CCO with hydrogens added


@dataclass(frozen=True)
class Torsion:
    """One torsion of a molecule (atom indices in RDKit's order for its SMILES with hydrogens added), the two
    wells it connects (dihedral in degrees, their names) and the angles of its relaxed scan, in scan order
    (from the first well)."""

    atoms: tuple[int, int, int, int]
    label: str
    wells: tuple[float, float]
    well_names: tuple[str, str]
    angles: tuple[float, ...]


TORSIONS = {
    "ethanol": Torsion(ROTOR, "C-C-O-H", (60.0, 180.0), ("gauche", "trans"), tuple(range(0, 181, 20))),
    # the amide bond: trans (C-C(=O)-N-C 180°, the methyls anti) to cis (0°), through the rotated amide at ~90°
    "n_methylacetamide": Torsion(
        (3, 2, 1, 0), "C-C(=O)-N-C", (180.0, 0.0), ("trans", "cis"), tuple(range(180, -1, -20))
    ),
}


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


def moving_side(atoms: Atoms, torsion: Sequence[int]) -> list[int]:
    """The atoms on the last atom's side of the torsion's middle bond (bonds by ASE's natural cutoffs): what a
    change of the dihedral moves."""
    from ase.neighborlist import NeighborList, natural_cutoffs

    neighbours = NeighborList(natural_cutoffs(atoms), self_interaction=False, bothways=True)
    neighbours.update(atoms)
    side, frontier = {torsion[3]}, [torsion[3]]
    while frontier:
        for other in neighbours.get_neighbors(frontier.pop())[0]:
            if other != torsion[2] and other not in side:
                side.add(int(other))
                frontier.append(int(other))
    if torsion[1] in side:
        raise ValueError(f"the torsion {tuple(torsion)} lies in a ring: its sides are joined")
    return sorted(side)


def torsion_scan(start: Atoms, calculator, torsion: Torsion, fmax: float = 0.02) -> dict:
    """Relaxed scan of ``torsion``: at each of its angles the structure relaxed (BFGS to ``fmax`` eV/Å, at most
    300 steps) with the dihedral held (``FixInternals``), continuing from the previous angle's structure.
    Returns the angles and each relaxed structure's dihedral (degrees), the energies relative to the lowest
    (meV), the barrier from the first well to the second (the highest energy strictly between them, less the
    first well's) and the second well's energy less the first's (meV)."""
    from ase.constraints import FixInternals
    from ase.optimize import BFGS

    atoms, energies, held = start.copy(), [], []
    side = moving_side(atoms, torsion.atoms)
    for angle in torsion.angles:
        atoms.set_constraint()
        atoms.set_dihedral(*torsion.atoms, angle, indices=side)
        atoms.set_constraint(FixInternals(dihedrals_deg=[[atoms.get_dihedral(*torsion.atoms), list(torsion.atoms)]]))
        atoms.calc = calculator
        BFGS(atoms, logfile=None).run(fmax=fmax, steps=300)
        energies.append(atoms.get_potential_energy())
        held.append(atoms.get_dihedral(*torsion.atoms))
    relative = 1e3 * (np.array(energies) - min(energies))
    angles = np.asarray(torsion.angles, dtype=float)
    first, second = (relative[np.argmin(np.abs(angles - well))] for well in torsion.wells)
    between = (angles > min(torsion.wells)) & (angles < max(torsion.wells))
    return {"torsion": torsion.label, "wells": dict(zip(torsion.well_names, torsion.wells, strict=True)),
            "angles": angles.tolist(), "energies_mev": relative.tolist(), "relaxed_dihedrals": held,
            "barrier_mev": float(relative[between].max() - first),
            "second_minus_first_mev": float(second - first)}  # fmt: skip


def rotor_profile(
    start: Atoms, calculator, angles: Sequence[float] = tuple(range(0, 181, 10)), fmax: float = 0.01
) -> dict:
    """Ethanol's relaxed C-C-O-H scan (``torsion_scan``, 10° steps by default, BFGS to ``fmax`` eV/Å), its
    values also under their well names: the gauche -> trans barrier and the trans - gauche difference (meV)."""
    scan = torsion_scan(start, calculator, replace(TORSIONS["ethanol"], angles=tuple(angles)), fmax)
    return {**scan, "barrier_gauche_to_trans_mev": scan["barrier_mev"],
            "trans_minus_gauche_mev": scan["second_minus_first_mev"]}  # fmt: skip
