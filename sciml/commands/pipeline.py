"""``sciml pipeline``: from a molecule to its kinetics report in one command.

    sciml pipeline --smiles CCO --temperature 300 --replicas 32 --production-ps 20 --atoms heavy+polar-h \\
        --output runs/ethanol

Stage 1 learns a potential on the fly from the oracle (the options of ``sciml learn``; ``--dataset frames.extxyz
--rounds 0`` trains on given frames instead), stage 2 runs ``--replicas`` Langevin trajectories with it at
``--temperature`` (one batched model call per step), stage 3 writes the kinetics report of ``sciml kinetics``
(:mod:`sciml.pipelines.kinetics`). Running the same command again in the same ``--output`` resumes each stage.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tqdm import tqdm

from sciml.commands.kinetics import atom_selection
from sciml.commands.learn import add_learning_arguments, learning_loop, parse
from sciml.commands.options import DEFAULT_LAG, add_precision, add_renamed


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sciml pipeline", description=__doc__.split("\n\n")[0])
    add_learning_arguments(parser)
    parser.set_defaults(output="runs/pipeline")
    from sciml.pipelines.kinetics import SamplingSettings

    defaults = SamplingSettings()
    sampling = parser.add_argument_group("sampling (stage 2; its temperature is --temperature)")
    add = sampling.add_argument
    add("--replicas", type=int, default=defaults.replicas, help="independent trajectories")
    add("--production-ps", type=float, default=defaults.production_ps, help="ps per replica after equilibration")
    add("--equilibration-ps", type=float, default=defaults.equilibration_ps, help="ps per replica, dropped")
    add("--sampling-timestep", type=float, default=defaults.timestep, help="fs")
    add("--sampling-friction", type=float, default=defaults.friction, help="1/fs")
    add("--interval", type=int, default=defaults.interval, help="steps between frames")
    add("--posterior-samples", type=int, default=defaults.posterior_samples,
        help="run replica r on draw r mod S of the potential's own uncertainty, so that the report's intervals "
        "carry the potential's error beside sampling's (0: all replicas on the trained potential)")  # fmt: skip
    add_precision(sampling)
    add_renamed(sampling, "--md-timestep", "--sampling-timestep", "sampling_timestep", type=float)
    add_renamed(sampling, "--md-friction", "--sampling-friction", "sampling_friction", type=float)
    kinetics = parser.add_argument_group("kinetics (stage 3)")
    add = kinetics.add_argument
    add("--lag", type=int, default=DEFAULT_LAG, help="the model's lag, frames")
    add("--lag-choice", default="plateau", choices=("plateau", "given"), help="as sciml kinetics --lag-choice")
    add("--states", type=int, default=2, help="metastable states (PCCA+)")
    add("--atoms", default=["heavy"], nargs="+", help="distance encoder atoms: heavy, heavy+polar-h or indices")
    add("--koopman-k", type=int, default=4, help="singular functions, the constant included")
    add("--koopman-epochs", type=int, default=20, help="epochs of the Koopman model's training")
    add("--samples", type=int, default=200, help="bootstrap samples")
    add("--microstates", type=int, default=50)
    return parser


def main(args: list[str]) -> dict:
    options = parse(args, parser)
    from sciml.pipelines.kinetics import SamplingSettings, structure_to_kinetics

    directory = Path(options.output)
    loop, starts, dataset, bar = learning_loop(options, directory / "learn")
    sampling = SamplingSettings(options.replicas, options.production_ps, options.equilibration_ps, options.temperature,
                                options.sampling_timestep, options.sampling_friction, options.interval,
                                options.seed, options.posterior_samples)  # fmt: skip
    kinetics = {"lag": options.lag, "lag_choice": options.lag_choice, "n_states": options.states,
                "atoms": atom_selection(options.atoms), "k": options.koopman_k, "epochs": options.koopman_epochs,
                "samples": options.samples, "microstates": options.microstates, "seed": options.seed}  # fmt: skip
    md_bar = tqdm(total=sampling.steps, unit="step", disable=options.no_progress, dynamic_ncols=True, leave=False)

    def progress(state: dict) -> None:
        md_bar.n = state["step"]
        md_bar.set_postfix_str(f"{state['replica_steps_per_s']:.0f} replica-steps/s, "
                               f"mean T {state['temperature'].mean():.0f} K")  # fmt: skip

    try:
        record = structure_to_kinetics(directory, loop, starts, dataset, sampling, kinetics, options.dtype,
                                       options.device, tqdm.write, progress)  # fmt: skip
    finally:
        bar.close()
        md_bar.close()
    seconds = record["seconds"]
    print("wall time: " + ", ".join(f"{stage} {value / 60:.1f} min" for stage, value in seconds.items()))
    return record
