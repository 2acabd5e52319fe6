"""One model on one system, timed through its ASE calculator; prints one JSON line (``bench_speed.py`` runs it).

Runs in sciml's environment (``--kind e2former`` or ``nequip``) or in MACE's own (``--kind mace``: mace-torch
0.3.16 pins e3nn 0.4.4), so only ASE, numpy and torch are imported at the top. Untrained weights of the accuracy
benchmark's architectures, on the systems of ``_systems.py`` (speed does not depend on them), float32 unless
``--dtype``.

    python _speed_worker.py --kind e2former --system 512 --calls 5 --md-steps 10 [--changes '{"layers": 4}']
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import time

import numpy as np
from _bench_utils import calculator_seconds, nequip_calculator, verlet_seconds
from _systems import SPECIES, cu_crystal, ethanol, molecule, palmitic_acid
from ase.calculators.calculator import all_changes

MOLECULES = {"ethanol": ethanol, "molecule": molecule, "palmitic": palmitic_acid}


def system(name: str):
    """``ethanol`` (9 atoms), ``molecule``: aspirin (21), ``palmitic`` (palmitic acid, 50); a number: an fcc Cu
    box of that many atoms (``_systems.py``)."""
    return MOLECULES[name]() if name in MOLECULES else cu_crystal(int(name))


def e2former_calculator(
    dtype: str, cutoff: float, compile: str = "auto", static: bool = False, device: str = "cpu", **changes
):
    """E2Former's defaults (the accuracy benchmark's model), with ``changes`` to its init arguments; ``compile``:
    the calculator's inference path (``auto``, its default: the ahead-of-time program, built or loaded during
    the first call; ``layers``: ``torch.compile`` of the layers, compiled during the warm-up calls; ``eager``);
    ``static``: fixed-capacity neighbour buffers (with ``layers`` on CUDA: CUDA graphs)."""
    from _systems import e2former

    from sciml.calculators import SciMLCalculator

    model = e2former("medium", cutoff=cutoff, **changes)
    calculator = SciMLCalculator(model, device, dtype, skin=0.5, compile=compile, static_shapes=static)
    return calculator, sum(p.numel() for p in model.parameters())


def mace_calculator(dtype: str, cutoff: float, device: str = "cpu"):
    """MACE 0.3.16 as ``mace_run_train`` builds it in the accuracy benchmark: 64x0e + 64x1o, L 1, 2
    interactions, correlation 3, 8 Bessel functions, radial MLP 64-64-64, readout 16x0e. On CUDA with
    cuequivariance's kernels when cuequivariance-torch is installed in its environment."""
    import mace  # noqa: F401  (first: it sets TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD, which e3nn 0.4.4's import needs)
    import torch
    from e3nn import o3
    from mace import modules
    from mace.calculators import MACECalculator

    torch.set_default_dtype(getattr(torch, dtype))
    torch.manual_seed(0)
    model = modules.ScaleShiftMACE(
        r_max=cutoff, num_bessel=8, num_polynomial_cutoff=5, max_ell=3,
        interaction_cls=modules.interaction_classes["RealAgnosticResidualInteractionBlock"],
        interaction_cls_first=modules.interaction_classes["RealAgnosticInteractionBlock"],
        num_interactions=2, num_elements=len(SPECIES), hidden_irreps=o3.Irreps("64x0e + 64x1o"),
        MLP_irreps=o3.Irreps("16x0e"), atomic_energies=np.zeros(len(SPECIES)), avg_num_neighbors=15.0,
        atomic_numbers=SPECIES, correlation=3, gate=torch.nn.functional.silu, radial_MLP=[64, 64, 64],
        atomic_inter_scale=1.0, atomic_inter_shift=[0.0], heads=["Default"],
    )  # fmt: skip
    cueq = device == "cuda" and importlib.util.find_spec("cuequivariance_torch") is not None
    calculator = MACECalculator(models=model.eval(), device=device, default_dtype=dtype, enable_cueq=cueq)
    return calculator, sum(p.numel() for p in model.parameters())


def xtb_calculator(dtype: str, cutoff: float, device: str = "cpu"):
    """GFN2-xTB through tblite's ASE calculator (the reference the potentials learn from; always float64)."""
    from tblite.ase import TBLite

    return TBLite(method="GFN2-xTB", verbosity=0), 0


def nequip_peer(dtype: str, cutoff: float, device: str = "cpu"):
    """NequIP 0.19.1 with E2Former's irreps (64x0e + 64x1o + 64x2e, ``parity=False``), 3 layers, eager; CPU."""
    if device != "cpu":
        raise SystemExit("the NequIP peer runs on the CPU only here")
    calculator, model = nequip_calculator(["H", "C", "O", "Cu"], cutoff, 3, 2, 64, dtype, avg_neighbours=15.0)
    return calculator, sum(p.numel() for p in model.parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", required=True, choices=["e2former", "mace", "nequip", "xtb"])
    parser.add_argument("--system", required=True, help="'molecule' or the atoms of an fcc Cu box (512, 4096)")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--warm", type=int, default=2)
    parser.add_argument("--md-steps", type=int, default=0)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--cutoff", type=float, default=5.0)
    parser.add_argument("--changes", default="{}", help="E2Former: JSON of init arguments over the defaults")
    parser.add_argument("--compile", default="auto", choices=["auto", "aot", "layers", "eager"],
                        help="E2Former: the calculator's inference path")  # fmt: skip
    parser.add_argument("--static", action="store_true", help="E2Former: fixed-capacity neighbour buffers")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()
    if args.kind == "e2former":
        changes = json.loads(args.changes)
        calculator, parameters = e2former_calculator(
            args.dtype, args.cutoff, args.compile, args.static, args.device, **changes
        )
    else:
        build = {"mace": mace_calculator, "nequip": nequip_peer, "xtb": xtb_calculator}[args.kind]
        calculator, parameters = build(args.dtype, args.cutoff, args.device)
    atoms = system(args.system)
    row = {"kind": args.kind, "system": args.system, "atoms": len(atoms), "parameters": parameters}
    if args.kind == "e2former":  # the first call: the ahead-of-time program built (or loaded), kernels loaded
        start = time.perf_counter()
        calculator.calculate(atoms, ["energy", "forces"], all_changes)
        row["first_call_s"] = time.perf_counter() - start
        row["inference"] = calculator.inference.describe()
        row["compile_s"] = calculator.inference.compile_seconds
    row["call_s"] = calculator_seconds(calculator, atoms, args.calls, args.warm)
    if args.md_steps:
        row["md_steps_per_s"] = 1.0 / verlet_seconds(calculator, atoms, args.md_steps)
    row["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
