"""``sciml kinetics``: timescales, Chapman-Kolmogorov test, metastable states, populations and mean first-passage
times, with bootstrap error bars, from molecular trajectories.

    sciml kinetics runs/md/replicas --lag 5 --states 2 --output runs/kinetics          # frames with time_fs
    sciml kinetics a.traj b.traj --frame-ps 0.1 --checkpoint koopman.ckpt --lag 2
    sciml kinetics reference/production --compare ml/production --lag 20 --output runs/compared

Trains a Koopman model on the trajectories (``--encoder distances``: an MLP on the inverse heavy-atom distances;
``molecular``: the E2Former backbone) unless ``--checkpoint`` gives one, then writes ``report.md``,
``report.html``, ``report.json``, the plots and each state's representative structures into ``--output``
(:mod:`sciml.training.kinetics`). ``--compare`` adds the populations and MFPTs of other trajectories (the same
molecule under another potential) in the states found on ``paths``.
"""

from __future__ import annotations

import argparse

import numpy as np

from sciml.commands.options import DEFAULT_LAG, add_renamed


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sciml kinetics", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("paths", nargs="+", help="trajectory files (any ASE format) or folders of them (one file per trajectory)")
    add("--output", default="kinetics", help="report folder")
    add("--frame-ps", type=float, help="ps between frames (default: from the frames' time_fs)")
    add("--lag", type=int, default=DEFAULT_LAG, help="the model's lag, frames")
    add("--lags", type=int, nargs="+", help="lags of the timescale plot and of the lag choice, frames (default: lag "
        "x 1/2, 1, 2, 4, 8, those up to a quarter of the shortest trajectory)")  # fmt: skip
    add("--lag-choice", default="plateau", choices=("plateau", "given"), help="plateau: report at --lag if the "
        "implied timescales have converged there, else at the first larger lag where they have (and the CK test "
        "passes); given: at --lag, saying whether it has converged")  # fmt: skip
    add("--states", type=int, default=2, help="metastable states (PCCA+)")
    add("--checkpoint", help="a trained KoopmanModule checkpoint (default: train one)")
    add("--encoder", default="distances", choices=("distances", "molecular"))
    add("--koopman-k", type=int, default=4, help="singular functions, the constant included")
    add("--koopman-epochs", type=int, default=20, help="epochs of the Koopman model's training")
    add("--koopman-batch-size", type=int, default=256, help="pairs per batch of the Koopman model's training")
    add(
        "--atoms",
        default=["heavy"],
        nargs="+",
        help="atoms of the distance encoder: heavy, heavy+polar-h (adds the H of OH, NH, SH rotors) or indices",
    )
    add("--cutoff", type=float, default=5.0, help="Å (graphs of the molecular encoder)")
    add("--samples", type=int, default=200, help="bootstrap samples")
    add("--microstates", type=int, default=50, help="k-means centres of the MSM under PCCA+")
    add("--compare", nargs="+", help="other trajectories (files or folders) to measure in the same states")
    add("--seed", type=int, default=0)
    add_renamed(parser, "--out", "--output", "output")
    add_renamed(parser, "--time-step", "--frame-ps", "frame_ps", type=float)
    add_renamed(parser, "--k", "--koopman-k", "koopman_k", type=int)
    add_renamed(parser, "--epochs", "--koopman-epochs", "koopman_epochs", type=int)
    add_renamed(parser, "--batch-size", "--koopman-batch-size", "koopman_batch_size", type=int)
    return parser


def atom_selection(values: str | list[str]) -> str | list[int]:
    """``--atoms``: a selection name or atom indices."""
    values = [values] if isinstance(values, str) else values
    if len(values) == 1 and not values[0].isdigit():
        return values[0]
    try:
        return [int(value) for value in values]
    except ValueError:
        raise SystemExit(f"--atoms takes one selection name or atom indices, got {values}") from None


def kinetics_arguments(options: argparse.Namespace) -> dict:
    """Keyword arguments of :func:`~sciml.training.kinetics.molecular_kinetics` from the parsed options."""
    return dict(
        paths=options.paths, out=options.output, time_step=options.frame_ps, lag=options.lag, lags=options.lags,
        n_states=options.states, checkpoint=options.checkpoint, encoder=options.encoder, k=options.koopman_k,
        epochs=options.koopman_epochs, batch_size=options.koopman_batch_size, cutoff=options.cutoff,
        samples=options.samples, microstates=options.microstates, seed=options.seed,
        atoms=atom_selection(options.atoms), compare=options.compare, lag_choice=options.lag_choice,
    )  # fmt: skip


def main(args: list[str]) -> dict:
    options = parser().parse_args(args)
    try:
        from sciml.training.kinetics import molecular_kinetics

        numbers = molecular_kinetics(**kinetics_arguments(options))
    except ImportError as error:
        raise SystemExit(f"sciml kinetics: {error}") from error
    timescale = numbers["timescales"]
    print(f"lag {numbers['lag']} (given {options.lag}): {numbers['lag_choice']['reason']}")
    slowest = int(np.argmin([abs(lag - numbers["lag"]) for lag in timescale["lags"]]))
    print(f"slowest implied timescale at lag {numbers['lag']}: {timescale['estimate'][slowest][0]:.4g} ps "
          f"[{timescale['lower'][slowest][0]:.4g}, {timescale['upper'][slowest][0]:.4g}]")  # fmt: skip
    print(numbers["chapman_kolmogorov"]["summary"])
    print(f"wrote {options.output}/report.md, report.html, report.json and the plots")
    return numbers
