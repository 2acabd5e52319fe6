"""One command line: ``sciml --help`` lists every subcommand, every option of every subcommand is kebab-case,
an idea has one spelling (a second one fails here), an option shared by several subcommands means the same thing
there (kind, type, choices and default), and each renamed option still works for one release, saying so."""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from sciml.cli import COMMANDS, LIGHTNING_RUNS, main

#: Spellings that an idea had before it got its one name (old -> the name now).
SECOND_SPELLINGS = {
    "--out": "--output", "--directory": "--output", "--trajectory": "--output", "--output-dir": "--output",
    "--time-step": "--timestep (MD, fs) or --frame-ps (between frames)", "--dt": "--timestep",
    "--log-every": "--interval", "--md-timestep": "--sampling-timestep", "--md-friction": "--sampling-friction",
    "--k": "--koopman-k", "--precision": "--dtype", "--frame": "--index",
}  # fmt: skip
#: Shared options whose default is set by the command's purpose (MD at 300 K, exploration at 500 K; one
#: replica for MD, 32 for kinetics sampling; each command's own output path), said in their help.
PURPOSE_DEFAULTS = {"--temperature", "--replicas", "--output", "--checkpoint", "--structure", "--epochs"}


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every non-Lightning subcommand's parser (``sciml data prepare``'s for ``data``)."""
    found = {}
    for name, (module, _) in COMMANDS.items():
        parser = importlib.import_module(module).parser()
        if name == "data":
            (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            parser = subparsers.choices["prepare"]
        found[name] = parser
    return found


def visible_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions if action.help != argparse.SUPPRESS
            for option in action.option_strings if option.startswith("--") and option != "--help"}  # fmt: skip


def test_sciml_help_lists_every_subcommand_with_one_line(capsys):
    main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    for name in [*LIGHTNING_RUNS, *COMMANDS]:
        (line,) = [line for line in lines if line.split()[:1] == [name]]
        assert len(line.split()) > 3  # a description, on its one line


def test_every_option_is_kebab_case_and_no_idea_has_a_second_spelling():
    problems = []
    for command, parser in parsers().items():
        for option in visible_options(parser):
            if not re.fullmatch(r"--[a-z0-9]+(-[a-z0-9]+)*", option):
                problems.append(f"sciml {command} {option}: not kebab-case")
            if option in SECOND_SPELLINGS:
                problems.append(f"sciml {command} {option}: spelled {SECOND_SPELLINGS[option]} elsewhere")
    assert not problems, problems


def test_an_option_in_several_subcommands_means_the_same_thing_in_each():
    seen: dict[str, list[tuple[str, tuple]]] = {}
    for command, parser in parsers().items():
        for option, action in visible_options(parser).items():
            default = None if option in PURPOSE_DEFAULTS else repr(action.default)
            kind = (type(action).__name__, action.nargs, getattr(action.type, "__name__", action.type),
                    tuple(action.choices or ()), default)  # fmt: skip
            seen.setdefault(option, []).append((command, kind))
    disagreeing = {option: uses for option, uses in seen.items() if len({kind for _, kind in uses}) > 1}
    assert not disagreeing, disagreeing
    shared = {option for option, uses in seen.items() if len(uses) > 1}
    assert {"--dtype", "--index", "--lag", "--timestep", "--interval", "--output", "--seed"} <= shared
    dtype = {kind for _, kind in seen["--dtype"]}
    assert {kind[-1] for kind in dtype} == {"'float32'"}  # one precision by default, in every command
    import inspect

    from sciml.commands.options import DEFAULT_LAG
    from sciml.training.kinetics import molecular_kinetics

    # the Python function's lag is the commands' lag
    assert inspect.signature(molecular_kinetics).parameters["lag"].default == DEFAULT_LAG


@pytest.mark.parametrize(
    ("command", "old", "dest", "value"),
    [
        ("md", ["--trajectory", "t.traj"], "output", "t.traj"),
        ("md", ["--log-every", "5"], "interval", 5),
        ("md", ["--uncertainty"], "require_uncertainty", True),
        ("kinetics", ["--out", "report"], "output", "report"),
        ("kinetics", ["--time-step", "0.1"], "frame_ps", 0.1),
        ("kinetics", ["--k", "3"], "koopman_k", 3),
        ("learn", ["--directory", "runs/x"], "output", "runs/x"),
        ("pipeline", ["--md-timestep", "2"], "sampling_timestep", 2.0),
        ("data", ["--split_mode", "random"], "split_mode", "random"),
    ],
)
def test_a_renamed_option_keeps_working_for_one_release_and_says_so(command, old, dest, value, capsys):
    required = {"md": ["--checkpoint", "c.ckpt", "--structure", "s.xyz"], "kinetics": ["frames.extxyz"],
                "data": ["prepare", "--output", "o.h5"]}.get(command, [])  # fmt: skip
    parser = importlib.import_module(COMMANDS[command][0]).parser()
    options = parser.parse_args([*required, *old])
    assert getattr(options, dest) == value
    message = capsys.readouterr().err
    assert f"{old[0]} is now" in message and "stops working in sciml 0.4" in message


def test_export_takes_its_old_positional_form_and_a_learn_config_its_old_keys(tmp_path, capsys):
    from sciml.commands import export, learn

    options = export.parse(["model.ckpt", "model.pt"])
    assert (options.checkpoint, options.output) == ("model.ckpt", "model.pt")
    assert "CHECKPOINT OUTPUT is now --checkpoint CHECKPOINT --output OUTPUT" in capsys.readouterr().err
    config = tmp_path / "old.yaml"
    config.write_text("smiles: O\ndirectory: runs/old\n")
    assert learn.parse(["--config", str(config)]).output == "runs/old"
    assert "'directory' in" in capsys.readouterr().err
    config.write_text("smiles: O\ndirectory: runs/old\noutput: runs/new\n")
    with pytest.raises(SystemExit, match="both 'directory' and its new name 'output'"):
        learn.parse(["--config", str(config)])
