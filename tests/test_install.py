"""Installation: requirements are ranges (an existing torch is kept), constraints.txt is the tested set, and the
import-time check names the supported range."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from sciml._dependencies import SUPPORTED, UnsupportedDependency, check
from tests.conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
REQUIREMENTS = {Requirement(r).name: Requirement(r) for r in PYPROJECT["project"]["dependencies"]}


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_no_requirement_is_pinned_to_one_version():
    pinned = [str(r) for r in REQUIREMENTS.values() if any(s.operator == "==" for s in r.specifier)]
    assert not pinned, f"exact pins belong in constraints.txt, not in the requirements: {pinned}"


def test_import_check_and_requirements_state_the_same_ranges():
    for name, supported in SUPPORTED.items():
        assert REQUIREMENTS[name].specifier == SpecifierSet(supported), name


def test_constraints_pin_every_requirement_inside_its_range():
    pins = constraints()
    for name, requirement in REQUIREMENTS.items():
        key = re.sub(r"[-_.]+", "-", name).lower()
        assert key in pins, f"{name} is not in constraints.txt"
        assert requirement.specifier.contains(pins[key]), f"{name}=={pins[key]} is outside {requirement.specifier}"


def test_import_check_names_the_supported_range():
    check({"torch": "2.13.0+cu126", "e3nn": "0.6.0"})  # a CUDA build's local version is the same release
    check({"torch": "2.15.0.dev20261201", "e3nn": "0.5.9"})  # newer torch: no ceiling
    with pytest.raises(UnsupportedDependency, match=r"torch 2\.3\.1 is installed, but sciml supports torch>=2\.4"):
        check({"torch": "2.3.1", "e3nn": "0.6.0"})
    with pytest.raises(UnsupportedDependency, match=r"e3nn 0\.4\.4 is installed, but sciml supports e3nn>=0\.5,<0\.7"):
        check({"torch": "2.13.0", "e3nn": "0.4.4"})
    check({"torch": "not-a-version"})  # a local source build without a PEP 440 version is not second-guessed


def dry_run(*arguments: str) -> list[tuple[str, str]]:
    """(name, version) of what ``pip install --dry-run`` would install into this environment."""
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet"]
    command += ["--report", "-", "--no-input", *arguments]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout[result.stdout.index("{") :])
    return [(item["metadata"]["name"], item["metadata"]["version"]) for item in report["install"]]


@pytest.mark.parametrize("constrained", [False, True], ids=["ranges", "constraints"])
def test_installing_sciml_keeps_the_torch_already_installed(constrained):
    """In an environment that holds torch (this one), installing sciml installs sciml and nothing else: pip keeps
    the user's torch, whether it follows the ranges alone or the tested set (``-c constraints.txt``)."""
    installed_torch = metadata.version("torch")
    arguments = ["-c", "constraints.txt", "-e", "."] if constrained else ["-e", "."]
    assert dry_run(*arguments) == [("sciml", metadata.version("sciml"))]
    assert metadata.version("torch") == installed_torch


def test_environment_has_no_broken_requirements():
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
