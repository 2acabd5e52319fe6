"""Package hygiene: ``sciml.testing`` imports without pytest, and tests import nothing from ``scripts/``."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import ROOT


def test_sciml_testing_imports_without_pytest():
    code = (
        "import sys; sys.modules['pytest'] = None\n"  # any `import pytest` now raises ImportError
        "import sciml.testing as t\n"
        "batch = t.graph_batch([t.random_molecule([6, 1, 8], seed=0)], cutoff=3.0)\n"
        "assert t.relative(batch.pos, batch.pos) == 0.0\n"
        "try:\n    t.EnergyModelTests\nexcept ImportError as error:\n    print('mixin needs', error.name)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "mixin needs pytest"


def test_tests_import_nothing_from_scripts():
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "scripts"]
    assert not offenders, offenders
