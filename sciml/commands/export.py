"""``sciml export``: a trained potential as a metatomic ``AtomisticModel`` file (TorchScript).

    sciml export --checkpoint runs/quickstart/.../last.ckpt --output model.pt [--dtype float64] [--kernels auto]

The file runs in metatomic engines without sciml (``metatomic_ase.MetatomicCalculator``, LAMMPS, i-PI,
GROMACS builds with metatomic). Needs the ``export`` extra. See :mod:`sciml.interfaces.metatomic`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sciml.commands.options import add_precision, renamed_message


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sciml export", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--checkpoint", help="a sciml fit checkpoint (.ckpt)")
    add("--output", help="the model file to write (.pt)")
    add("positional", nargs="*", help=argparse.SUPPRESS)  # CHECKPOINT OUTPUT, before 0.3
    add_precision(parser, device=False)
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
    options = parse(args)
    if Path(options.output).exists() and not options.overwrite:
        raise SystemExit(f"sciml export: '{options.output}' exists; pass --overwrite to replace it")
    try:
        from sciml.interfaces.metatomic import export_metatomic
    except ImportError as error:
        raise SystemExit(
            f"sciml export needs metatomic-torch ({error}): pip install 'sciml[export]' "
            "(metatomic-torch==0.1.19 metatomic-ase==0.1.4)"
        ) from error
    summary = export_metatomic(
        options.checkpoint, options.output, options.dtype, not options.no_ema, options.overwrite, options.kernels
    )
    print(
        f"wrote {options.output}: metatomic AtomisticModel, {options.dtype}, cutoff {summary['cutoff']:g} Å, "
        f"species {summary['species']}, CPU and CUDA; kernels: {summary['kernels']} on CPU, "
        f"{summary['cuda_kernels']} on CUDA; libraries an engine loads: {summary['libraries'] or 'none'}; "
        f"trace checked against the model on a periodic probe: {summary['trace_error']:.1e} relative"
    )
    return summary


def parse(args: list[str]) -> argparse.Namespace:
    """The options; ``sciml export CHECKPOINT OUTPUT`` (the form before 0.3) still works, saying so."""
    options = parser().parse_args(args)
    if options.positional:
        if len(options.positional) != 2 or options.checkpoint or options.output:
            raise SystemExit("sciml export: give --checkpoint and --output")
        print(renamed_message("sciml export", "CHECKPOINT OUTPUT", "--checkpoint CHECKPOINT --output OUTPUT"),
              file=sys.stderr)  # fmt: skip
        options.checkpoint, options.output = options.positional
    if not (options.checkpoint and options.output):
        raise SystemExit("sciml export: give --checkpoint and --output")
    return options
