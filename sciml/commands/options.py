"""The options every subcommand spells the same way, and the renamed ones that keep working for one release.

One name for each idea across ``sciml``'s subcommands (``tests/test_cli_options.py`` parses them all):

- ``--output``: where a command's outputs go (a file or a folder, said in its help);
- ``--timestep``: an MD time step, fs (``--sampling-timestep`` for the second MD of ``sciml pipeline``);
- ``--interval``: MD steps between records (trajectory frames, log lines);
- ``--replicas``: replicas run together (``--exploration-replicas`` for ``sciml learn``'s exploration);
- ``--dtype``: the model's precision, float32 by default; ``--device``; ``--index``: the frame of a structure
  file, -1 (the last, as ASE reads) by default;
- ``--lag``: the Koopman model's lag in frames, 10 by default; ``--koopman-k`` and ``--koopman-epochs``;
- kebab-case everywhere (``sciml fit``'s dotted config keys, ``--trainer.max_epochs``, are LightningCLI's: they
  mirror the YAML config).

A renamed option (:func:`add_renamed`) is hidden from ``--help``, still parsed into its new name's value, and says
on stderr what it is now called and when it stops working.
"""

from __future__ import annotations

import argparse
import sys

DTYPES = ("float32", "float64")
DEFAULT_DTYPE = "float32"
DEFAULT_INDEX = -1
DEFAULT_LAG = 10
RENAMED_SINCE, RENAMED_UNTIL = "0.3", "0.4"


def add_precision(parser: argparse.ArgumentParser | argparse._ArgumentGroup, device: bool = True) -> None:
    """``--dtype`` (float32 by default) and, with ``device``, ``--device``."""
    parser.add_argument("--dtype", default=DEFAULT_DTYPE, choices=DTYPES, help="the model's precision")
    if device:
        parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")


def add_index(parser: argparse.ArgumentParser | argparse._ArgumentGroup, of: str = "--structure") -> None:
    """``--index``: the frame of a structure file (-1, the last, by default)."""
    parser.add_argument("--index", type=int, default=DEFAULT_INDEX, help=f"frame of {of} (default: the last)")


def renamed_message(prog: str, old: str, new: str) -> str:
    return (f"{prog}: {old} is now {new} (renamed in sciml {RENAMED_SINCE}); {old} stops working in sciml "
            f"{RENAMED_UNTIL}")  # fmt: skip


class _Renamed(argparse.Action):
    """Stores into the new option's destination and says that the option was renamed."""

    def __init__(self, option_strings, dest, new: str, flag: bool = False, **kwargs) -> None:
        self.new, self.flag = new, flag
        if flag:
            kwargs["nargs"] = 0
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(renamed_message(parser.prog, option_string, self.new), file=sys.stderr)
        setattr(namespace, self.dest, True if self.flag else values)


def add_renamed(parser: argparse.ArgumentParser | argparse._ArgumentGroup, old: str, new: str, dest: str,
                flag: bool = False, **kwargs) -> None:  # fmt: skip
    """Keep ``old`` working as ``new`` (destination ``dest``) for one release: hidden from the help, parsed
    with ``kwargs`` (``type``, ``nargs``), a message on stderr when used; ``flag`` for a switch."""
    parser.add_argument(old, dest=dest, action=_Renamed, new=new, flag=flag, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS, **kwargs)  # fmt: skip


def renamed_config_keys(values: dict, renames: dict[str, str], source: str, prog: str) -> dict:
    """``values`` of a YAML config with the old keys of ``renames`` (old -> new) under their new names, saying
    so; giving both is refused."""
    values = dict(values)
    for old, new in renames.items():
        if old in values:
            if new in values:
                raise SystemExit(f"{prog}: {source}: both '{old}' and its new name '{new}'")
            print(renamed_message(prog, f"'{old}' in {source}", f"'{new}'"), file=sys.stderr)
            values[new] = values.pop(old)
    return values
