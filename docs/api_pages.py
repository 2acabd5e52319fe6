"""Write the API reference pages ``docs/api/*.md`` from the package: every public name, none by hand.

A package page documents the names in its ``__all__`` (``sciml.data.AtomsDataModule``) and then each of its
modules with the public names defined there that no package re-exports (``sciml.data.stats.energy_reference``).
Public: defined in that module (not imported into it), no leading underscore; module constants are the
upper-case assignments at top level. ``tests/test_docs.py`` checks that the committed pages equal what this
writes, so a new public name without a page fails the tests.

    python docs/api_pages.py            # rewrite docs/api/
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import sciml

API = Path(__file__).resolve().parent / "api"
SECTIONS = {  # page -> (title, what it holds)
    "data": ("sciml.data", "Data: readers, graphs, splits, data modules, stochastic systems"),
    "equivariant": ("sciml.equivariant", "Equivariant primitives and kernels"),
    "nn": ("sciml.nn", "Neural-network layers, forces and stress, checkpoints"),
    "models": ("sciml.models", "Models: E2Former and the per-edge baseline"),
    "uncertainty": ("sciml.uncertainty", "Uncertainty: one interface, the committee, the last layer, the scale rule"),
    "koopman": ("sciml.koopman", "Koopman operators: losses, encoders, estimator, kinetics"),
    "training": ("sciml.training", "Training: LightningModules, schedules, callbacks"),
    "calculators": ("sciml.calculators", "ASE calculator, batched potentials, checkpoints"),
    "md": ("sciml.md", "Molecular dynamics: one settings type, the replica engine, ASE's integrators"),
    "interfaces": ("sciml.interfaces", "Interfaces to LAMMPS and metatomic"),
    "active": ("sciml.active", "Active learning: oracles, the label store, exploration, the loop"),
    "pipelines": ("sciml.pipelines", "Pipelines: from a structure to its kinetics"),
    "testing": ("sciml.testing", "Testing helpers for energy models"),
    "cli": ("sciml.cli", "The sciml command"),
}
SKIPPED = {"sciml.__main__", "sciml.equivariant.kernels.__main__"}


def modules_under(prefix: str) -> list[str]:
    """``prefix`` and every module below it, sorted, without ``__main__`` modules."""
    names = [prefix]
    module = importlib.import_module(prefix)
    if hasattr(module, "__path__"):
        names += [info.name for info in pkgutil.walk_packages(module.__path__, prefix + ".")]
    if prefix == "sciml.cli":
        names += [info.name for info in pkgutil.walk_packages(importlib.import_module("sciml.commands").__path__,
                                                                "sciml.commands.")]  # fmt: skip
        names.append("sciml.commands")
    return sorted(name for name in names if name not in SKIPPED and ".__main__" not in name)


def exported() -> dict[int, str]:
    """id(object) -> the package path that exports it in ``__all__`` (the name users import)."""
    found = {}
    for name in modules_under("sciml"):
        module = importlib.import_module(name)
        if hasattr(module, "__path__"):
            for member in getattr(module, "__all__", []):
                if member in vars(module):  # lazily imported names are documented where they are defined
                    found.setdefault(id(vars(module)[member]), f"{name}.{member}")
    return found


def defined_constants(module) -> list[str]:
    """Upper-case names assigned at the top level of ``module``'s source."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return []
    names = []
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Name) and target.id.isupper() and not target.id.startswith("_"):
                names.append(target.id)
    return names


def public_members(module, reexported: dict[int, str]) -> list[str]:
    """Public names defined in ``module`` that no package's ``__all__`` exports (those have their own entry)."""
    members = []
    for name, value in vars(module).items():
        if name.startswith("_") or not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if getattr(value, "__module__", None) == module.__name__ and id(value) not in reexported:
            members.append(name)
    return sorted(members) + defined_constants(module)


def automodule(name: str, members: list[str], heading: str | None = None) -> str:
    """A MyST block documenting ``name`` with exactly ``members`` (none: the module docstring only)."""
    options = "" if not members else "\n   :members: " + ", ".join(members)
    block = f"```{{eval-rst}}\n.. automodule:: {name}{options}\n```\n"
    return (f"## `{heading}`\n\n" if heading else "") + block


def page(key: str) -> str:
    package_name, title = SECTIONS[key]
    reexported = exported()
    package = importlib.import_module(package_name)
    parts = [f"# {title}\n", f"`{package_name}`\n"]
    exports = [name for name in getattr(package, "__all__", []) if name in vars(package)]
    if exports:
        parts.append(automodule(package_name, list(exports)))
    for name in modules_under(package_name):
        module = importlib.import_module(name)
        if name == package_name and exports:
            continue
        exports_here = getattr(module, "__all__", None) if hasattr(module, "__path__") else None
        members = public_members(module, reexported)
        if exports_here:  # a subpackage: the names it is the first to export
            members = [
                m for m in exports_here if m in vars(module) and reexported.get(id(vars(module)[m])) == f"{name}.{m}"
            ]
        if members or (module.__doc__ and name != package_name):
            parts.append(automodule(name, members, heading=name))
    return "\n".join(parts)


def index() -> str:
    lines = ["# API reference\n", "Generated from the docstrings (shapes and units are stated there: Å, eV, eV/Å, fs).",
             "Each package page lists the names the package exports, then each of its modules.\n",
             "```{toctree}", ":maxdepth: 1", ""]  # fmt: skip
    lines += list(SECTIONS) + ["```", ""]
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """``{file name: content}`` of every API page."""
    return {"index.md": index(), **{f"{key}.md": page(key) for key in SECTIONS}}


def main() -> None:
    API.mkdir(exist_ok=True)
    for name, text in pages().items():
        (API / name).write_text(text)
    print(f"wrote {len(SECTIONS) + 1} pages into {API} (sciml {sciml.__version__})")


if __name__ == "__main__":
    main()
