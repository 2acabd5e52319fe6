"""``sciml export``: a trained potential as a metatomic ``AtomisticModel`` file (TorchScript).

    sciml export runs/quickstart/.../last.ckpt model.pt [--dtype float64] [--kernels auto] [--overwrite]

The file runs in metatomic engines without sciml (``metatomic_ase.MetatomicCalculator``, LAMMPS, i-PI,
GROMACS builds with metatomic). Needs the ``export`` extra. See :mod:`sciml.interfaces.metatomic`.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sciml export", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("checkpoint", help="a sciml fit checkpoint (.ckpt)")
    add("out", help="the model file to write (.pt)")
    add("--dtype", default="float64", choices=["float32", "float64"], help="the model's dtype in the engine")
    add("--no-ema", action="store_true", help="export the trained weights instead of their moving average")
    add("--overwrite", action="store_true", help="replace an existing output file")
    add(
        "--kernels",
        default="auto",
        choices=["auto", "reference"],
        help="auto: the compiled sciml:: kernels (the file names their library), reference: pure-PyTorch ops",
    )
    return parser


def main(args: list[str]) -> dict:
    options = parser().parse_args(args)
    if Path(options.out).exists() and not options.overwrite:
        raise SystemExit(f"sciml export: '{options.out}' exists; pass --overwrite to replace it")
    try:
        from sciml.interfaces.metatomic import export_metatomic
    except ImportError as error:
        raise SystemExit(
            f"sciml export needs metatomic-torch ({error}): pip install 'sciml[export]' "
            "(metatomic-torch==0.1.19 metatomic-ase==0.1.4)"
        ) from error
    summary = export_metatomic(
        options.checkpoint, options.out, options.dtype, not options.no_ema, options.overwrite, options.kernels
    )
    print(
        f"wrote {options.out}: metatomic AtomisticModel, {options.dtype}, cutoff {summary['cutoff']:g} Å, "
        f"species {summary['species']}, CPU and CUDA; kernels: {summary['kernels']} on CPU, "
        f"{summary['cuda_kernels']} on CUDA; libraries an engine loads: {summary['libraries'] or 'none'}; "
        f"trace checked against the model on a periodic probe: {summary['trace_error']:.1e} relative"
    )
    return summary
