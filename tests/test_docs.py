"""The documentation site builds with every warning an error, documents every public name, and shows every
benchmark results file."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

DOCS = ROOT / "docs"


def api_pages_module():
    spec = importlib.util.spec_from_file_location("api_pages", DOCS / "api_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_pages_are_current():
    """``docs/api/`` is what ``docs/api_pages.py`` writes now: a new public name is in the reference."""
    stale = [name for name, text in api_pages_module().pages().items() if (DOCS / "api" / name).read_text() != text]
    assert not stale, f"run `python docs/api_pages.py`: these API pages are out of date: {stale}"


def test_every_results_file_has_a_page():
    results = {path.stem for path in (ROOT / "benchmarks" / "results").glob("*.md")}
    pages = {path.stem for path in (DOCS / "benchmarks").glob("*.md")}
    assert results <= pages, f"results files without a page in docs/benchmarks/: {sorted(results - pages)}"
    for name in results:
        assert f"benchmarks/results/{name}.md" in (DOCS / "benchmarks" / f"{name}.md").read_text()
    assert sorted(results) == sorted(  # and each page is in the benchmarks toctree
        name for name in (DOCS / "benchmarks" / "index.md").read_text().split() if name in results
    )


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    pytest.importorskip("sphinx")
    out = tmp_path_factory.mktemp("docs")
    before = sorted(DOCS.rglob("*"))
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out / "html")]
    command += ["-d", str(out / "doctrees")]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=environment)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    assert sorted(DOCS.rglob("*")) == before, "the build wrote into docs/"
    return out / "html"


def test_docs_build_with_warnings_as_errors_and_write_nothing_into_the_tree(built_site):
    """A broken cross-reference, a missing page or an unresolved name in a docstring fails this build (the
    fixture also checks that it wrote nothing into ``docs/``)."""
    for page in ("index", "install", "quickstart", "potentials", "koopman", "cite", "api/models", "notebooks"):
        assert (built_site / f"{page}.html").exists(), page
    for notebook in ("01_ou_singular_functions", "02_logistic_map_spectrum", "03_molecular_slow_modes"):
        assert (built_site / "notebooks" / f"{notebook}.html").exists(), notebook


def test_every_public_name_is_in_the_api_reference(built_site):
    """Every name in a package's ``__all__`` is an object of the built reference (objects.inv)."""
    from sphinx.util.inventory import InventoryFile

    inventory = InventoryFile.loads((built_site / "objects.inv").read_bytes(), uri="")
    documented = {name for entries in inventory.data.values() for name in entries}
    pages = api_pages_module()
    missing = []
    for package_name in pages.modules_under("sciml"):
        package = importlib.import_module(package_name)
        if not hasattr(package, "__path__"):
            continue
        for name in getattr(package, "__all__", []):
            value = getattr(package, name)
            defined = f"{getattr(value, '__module__', package_name)}.{name}"
            if f"{package_name}.{name}" not in documented and defined not in documented and name != "__version__":
                missing.append(f"{package_name}.{name}")
    assert not missing, f"public names missing from the API reference: {missing}"
    assert "sciml.models.E2Former.preset" in documented and "sciml.training.PotentialModule" in documented
