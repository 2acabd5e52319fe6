"""Sphinx configuration of the sciml documentation (MyST Markdown, autodoc + napoleon, notebooks via myst-nb).

Build: ``python -m sphinx -W -b html docs docs/_build/html``. The test suite builds it with ``-W`` (warnings are
errors: a broken cross-reference, a missing page, an unresolved name) and checks that every public name of
every package is in the API reference (``tests/test_docs.py``). The notebooks are rendered from what is stored in
them, never executed here (``nb_execution_mode = "off"``).
"""

from __future__ import annotations

import importlib.util

import sciml

project = "sciml"
author = "the sciml developers"
copyright = "2026, the sciml developers"
release = sciml.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_nb",  # Markdown pages (MyST) and .ipynb notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]
exclude_patterns = ["_build", "notebooks/figures", "**.ipynb_checkpoints"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "off"

# API reference: signatures from the code, types in the description, docstrings in Google style
autodoc_default_options = {"show-inheritance": True, "member-order": "bysource"}
autodoc_typehints = "description"
autodoc_inherit_docstrings = False
# The site builds from the `docs` extra alone: modules that import what other extras install (pytest for
# sciml.testing's mixins, metatensor/metatomic for the export) are documented against mocks where it is absent
autodoc_mock_imports = [
    name for name in ("pytest", "metatensor", "metatomic", "metatomic_ase") if importlib.util.find_spec(name) is None
]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# every reference must resolve; names of other libraries (torch, ase, lightning, ...) have no pages here
# (no intersphinx: the build runs offline), so only those are let through
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(torch|np|numpy|ase|lightning|L|e3nn|torch_geometric|jsonargparse|h5py|scipy|nn|optim)(\..*)?"),
    (r"py:.*", r"(abc|collections\.abc|typing|pathlib|enum|dataclasses|argparse|os|types|concurrent\.futures)\..*"),
    (r"py:.*", r"(Tensor|Path|Atoms|Callable|Iterable|Iterator|Sequence|Mapping|Module|Optimizer|Batch|Data)"),
    (r"py:.*", r"(optional|default|callable|array_like|ndarray|\.\.\.)"),
    (r"py:class", r"(OptimizerCallable|LRSchedulerCallable|LightningDataModule|LightningModule|Callback|Paths)"),
    (r"py:class", r"(Calculator|Observable|Executor)"),  # ASE's calculator base; sciml.koopman.estimator's type alias
]

html_theme = "furo"
html_title = f"sciml {release}"
html_static_path: list[str] = []


def resolve_reexports(app, env, node, contnode):
    """Resolve ``sciml.data.atoms_datamodule.AtomsDataModule`` (where type hints and docstrings point) to the
    documented ``sciml.data.AtomsDataModule`` (the name users import) by dropping module segments."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if "." not in target and node.get("py:module"):  # a bare name in a docstring: relative to its module
        target = f"{node['py:module']}.{target}"
    if not target.startswith("sciml."):
        return None
    domain = env.get_domain("py")
    parts = target.split(".")
    for start in range(1, len(parts) - 1):
        for stop in range(start + 1, len(parts)):
            candidate = ".".join(parts[:start] + parts[stop:])
            if candidate in domain.objects:
                return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], candidate, node, contnode)
    return None


def escape_bars(app, what, name, obj, options, lines):
    """Docstrings write norms as ``|r|^l``; outside inline literals a bar would start a substitution."""
    for k, line in enumerate(lines):
        pieces = line.split("``")
        lines[k] = "``".join(p.replace("|", "\\|") if i % 2 == 0 else p for i, p in enumerate(pieces))


def setup(app):
    app.connect("missing-reference", resolve_reexports)
    app.connect("autodoc-process-docstring", escape_bars)
