"""Package hygiene: imports run only down the house, ``sciml.testing`` imports without pytest, tests import
nothing from ``scripts/``, and runs write their outputs atomically into their run directory only."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.conftest import ROOT

#: The floors of the house (docs/design.md, "The map"): a package imports from its own floor or below.
FLOORS = {
    "_dependencies": 0, "_deprecation": 0,
    "data": 1, "equivariant": 1,
    "nn": 2,
    "models": 3, "uncertainty": 3, "koopman": 3,
    "training": 4,
    "calculators": 5, "md": 5, "interfaces": 5,
    "active": 6,
    "pipelines": 7,
    "commands": 8, "cli": 8,
    "testing": 9,
}  # fmt: skip


def test_imports_run_only_down_the_house():
    packages = {path.name for path in (ROOT / "sciml").iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert packages | {"cli", "_dependencies", "_deprecation"} == set(FLOORS), (
        "a new package needs its floor in FLOORS and in docs/design.md"
    )
    upward = []
    for path in sorted((ROOT / "sciml").rglob("*.py")):
        parts = path.relative_to(ROOT / "sciml").parts
        here = parts[0] if len(parts) > 1 else path.stem
        if here not in FLOORS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sciml."):
                there = node.module.split(".")[1]
                if FLOORS.get(there, 0) > FLOORS[here]:
                    upward.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}")
    assert not upward, upward


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


def test_atomic_output_commits_refuses_and_discards(tmp_path):
    from sciml.data.files import AtomicOutput

    target = tmp_path / "out" / "result.extxyz"
    with AtomicOutput(target) as temporary:
        assert temporary.suffix == ".extxyz" and temporary.parent == target.parent
        temporary.write_text("complete")
        assert not target.exists()  # nothing at the destination until the write is done
    assert target.read_text() == "complete"
    with pytest.raises(FileExistsError, match=r"result.extxyz' already exists; pass --overwrite"):
        AtomicOutput(target, option="--overwrite")
    with pytest.raises(RuntimeError, match="interrupted"), AtomicOutput(target, overwrite=True) as temporary:
        temporary.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "complete" and sorted(p.name for p in target.parent.iterdir()) == ["result.extxyz"]


def git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout


def test_fit_predict_and_md_write_only_into_their_run_directory(tmp_path, monkeypatch):
    """From the repository root: `sciml fit`, `sciml predict` and `sciml md` leave `git status`
    unchanged (outputs go into the run directory), and a second predict refuses to overwrite."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    from sciml.cli import run

    before = git_status()
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", ["sciml"])
    config = ["-c", "configs/e2former/quickstart.yaml", f"--trainer.default_root_dir={tmp_path}"]
    tiny = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1"]
    run(["fit", *config, *tiny, "--trainer.enable_progress_bar=false", "--model.init_args.model.init_args.channels=8"])
    (checkpoint,) = tmp_path.rglob("last.ckpt")
    predict = ["predict", *config, f"--ckpt_path={checkpoint}", "--model.init_args.model.init_args.channels=8"]
    predict += ["--data.init_args.predict_paths=data/ethanol_gfn2.extxyz", "--trainer.limit_predict_batches=1"]
    run([*predict, "--trainer.enable_progress_bar=false"])
    assert (tmp_path / "predictions.extxyz").exists()
    with pytest.raises(FileExistsError, match="predictions.extxyz' already exists"):
        run([*predict, "--trainer.enable_progress_bar=false"])
    md = [sys.executable, "-m", "sciml", "md", "--checkpoint", str(checkpoint), "--structure"]
    md += ["data/ethanol_gfn2.extxyz", "--steps", "20", "--dtype", "float32"]
    result = subprocess.run(md, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (checkpoint.parent.parent / "md" / "replica_000.extxyz").exists()
    assert git_status() == before
