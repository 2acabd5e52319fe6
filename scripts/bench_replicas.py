"""Many replicas in one model call: the replica MD driver against ASE-driven MD and the reference method's MD.

For R = 1, 8, 32, 128 replicas of aspirin (21 atoms) and of a 512-atom fcc Cu box, the replica-steps per second
of the MD engine ``sciml.md.engine`` (velocity Verlet, 0.5 fs, one batched energy + forces call per step)
against one ASE velocity-Verlet step through ``SciMLCalculator`` (what ``sciml md`` runs), with the same
untrained ``small`` E2Former (float32; speed does not depend on training), and against GFN2-xTB's own MD on the
molecule (tblite through ASE, the reference method, on the same cores).

Results with provenance: ``benchmarks/results/replicas.{json,md}``.

    python scripts/bench_replicas.py [--replicas 1 8 32 128] [--steps 20]
    python scripts/bench_replicas.py --smoke --results /tmp/replicas

Last line: RESULT replica_speedup_r32=<x> (aspirin: R=32 replica-steps/s over ASE steps/s) ...
"""

from __future__ import annotations

import argparse
import os

from _bench_utils import verlet_seconds
from _results import RESULTS, markdown_table, write_results
from _systems import cu_crystal, e2former, molecule

from sciml.calculators import SciMLCalculator
from sciml.calculators.replicas import BatchedPotential
from sciml.md import MDSettings, run_replicas


def replica_rate(model, atoms, replicas: int, steps: int) -> float:
    """Replica-steps per second of ``steps`` velocity-Verlet steps (after 2 warm-up steps)."""
    potential = BatchedPotential(model, atoms.numbers, atoms.cell[:], atoms.pbc)
    settings = MDSettings("nve", timestep=0.5, steps=2, temperature=300, interval=10_000)
    run_replicas(potential, atoms, replicas, settings)
    settings.steps = steps
    return run_replicas(potential, atoms, replicas, settings)["replica_steps_per_s"]


def xtb_steps_per_second(atoms, steps: int) -> float:
    from tblite.ase import TBLite

    return 1.0 / verlet_seconds(TBLite(method="GFN2-xTB", verbosity=0), atoms, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--smoke", action="store_true", help="R = 1, 2 and 2 steps: checks the path")
    args = parser.parse_args()
    if args.smoke:
        args.replicas, args.steps = [1, 2], 2
    model = e2former("small")
    systems = {"aspirin": molecule(), "cu512": cu_crystal(32 if args.smoke else 512)}
    data: dict = {}
    for name, atoms in systems.items():
        ase_rate = 1.0 / verlet_seconds(SciMLCalculator(model), atoms, args.steps)
        rates = {replicas: replica_rate(model, atoms, replicas, args.steps) for replicas in args.replicas}
        data[name] = {"atoms": len(atoms), "ase_steps_per_s": ase_rate, "replica_steps_per_s": rates}
        print(name, f"ASE {ase_rate:.1f} steps/s", {r: round(v, 1) for r, v in rates.items()}, flush=True)
    data["aspirin"]["xtb_steps_per_s"] = xtb_steps_per_second(systems["aspirin"], args.steps)
    rows = []
    for name, row in data.items():
        for replicas, rate in row["replica_steps_per_s"].items():
            rows.append([name, row["atoms"], replicas, f"{rate:.1f}", f"{rate / row['ase_steps_per_s']:.2f}",
                         f"{1e3 / rate:.2f}"])  # fmt: skip
        rows.append([name, row["atoms"], "ASE, 1", f"{row['ase_steps_per_s']:.1f}", "1.00",
                     f"{1e3 / row['ase_steps_per_s']:.2f}"])  # fmt: skip
    xtb = data["aspirin"]["xtb_steps_per_s"]
    versus_ase = xtb / data["aspirin"]["ase_steps_per_s"]
    rows.append(["aspirin, GFN2-xTB (tblite)", 21, "ASE, 1", f"{xtb:.1f}", f"{versus_ase:.2f}", f"{1e3 / xtb:.2f}"])
    sections = [
        f"Velocity Verlet, 0.5 fs, untrained `small` E2Former in float32, {args.steps} timed steps, "
        f"{os.environ.get('OMP_NUM_THREADS', 'all')} OpenMP threads:",
        markdown_table(["system", "atoms", "replicas", "replica-steps/s", "x ASE", "ms per replica-step"], rows),
    ]
    largest = max(r for r in args.replicas if r <= 32)
    result = {f"replica_speedup_r{largest}": data["aspirin"]["replica_steps_per_s"][largest]
              / data["aspirin"]["ase_steps_per_s"]}  # fmt: skip
    result |= {f"replica_speedup_cu512_r{largest}": data["cu512"]["replica_steps_per_s"][largest]
               / data["cu512"]["ase_steps_per_s"]}  # fmt: skip
    result["xtb_steps_per_s_aspirin"] = xtb
    title = "Replica MD: many replicas in one model call" + (" (smoke run)" if args.smoke else "")
    write_results("replicas", title, sections, data, result, args.results)


if __name__ == "__main__":
    main()
