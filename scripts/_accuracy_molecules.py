"""E2Former against MACE over several molecules: ``bench_accuracy.py --molecules`` (issue 59).

Each molecule gets the aspirin benchmark's data recipe, made here on first use (``generate_molecular_md.py``:
GFN2-xTB Langevin MD at 0.5 fs, a frame every 10 steps, four independent runs from their own RDKit conformers
and seeds after 1 ps of equilibration: train 1,500 frames at 500 K, validation 300 at 500 K, tests 500 at 400 K
and 500 at 600 K; ``data/aspirin_md`` for aspirin, ``<out>/data/<molecule>`` for the others), then both models
train for the same wall-clock budget in one window on the same cores:

- E2Former: ``configs/e2former/aspirin_md.yaml`` (the library's defaults) with only the data paths changed;
- MACE 0.3.16 in float32 (its better row in ``accuracy_vs_mace_40min.md``), as ``_accuracy_mace.py`` trains it.

Every (molecule, model, seed) is a stage cached in ``<out>/molecules/<molecule>/<model>_seed<k>/stage.json``.
Ratios are E2Former's over MACE's at the same seed, errors over both test temperatures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _accuracy_mace import mace_files, mace_python, train_mace
from _md_runs import run_two_at_a_time
from bench_accuracy import DATA, RUNS, SCRIPTS, SMOKE, TESTS, evaluate, timed, train_e2former

MOLECULES = {
    "aspirin": "CC(=O)Oc1ccccc1C(=O)O",  # 21 atoms: the recipe was tuned on it
    "ethanol": "CCO",  # 9 atoms
    "fluorophenyl_sulfonamide": "CS(=O)(=O)Nc1ccc(F)cc1",  # 20 atoms, S and F: the held-out molecule
    "ibuprofen": "CC(C)Cc1ccc(cc1)C(C)C(=O)O",  # 33 atoms, flexible
}
SMOKE_STEPS = {"train_500K.extxyz": 300, "valid_500K.extxyz": 100, "test_400K.extxyz": 100, "test_600K.extxyz": 100}


def molecule_data(name: str, out: Path, smoke: bool) -> Path:
    """The folder of ``name``'s four files, generated where missing (two runs at a time, one thread each)."""
    folder = DATA if name == "aspirin" and not smoke else out / "data" / name
    folder.mkdir(parents=True, exist_ok=True)
    commands = []
    for file, (steps, temperature, seed) in RUNS.items():
        if (folder / file).exists():
            continue
        steps = SMOKE_STEPS[file] if smoke else steps
        command = [sys.executable, str(SCRIPTS / "generate_molecular_md.py"), "--smiles", MOLECULES[name],
                   "--name", name, "--steps", str(steps), "--every", "10", "--temperature", str(temperature),
                   "--seed", str(seed), "--equilibrate", "200" if smoke else "2000",
                   "--out", str(folder / file)]  # fmt: skip
        commands.append(command)
    run_two_at_a_time(commands)
    missing = [file for file in RUNS if not (folder / file).exists()]
    if missing:
        raise RuntimeError(f"generating {name}'s {missing} failed")
    return folder


def data_overrides(folder: Path) -> tuple[str, ...]:
    """``sciml fit`` overrides pointing aspirin_md.yaml's data at ``folder``."""
    tests = ",".join(str(folder / test) for test in TESTS)
    train, valid = folder / "train_500K.extxyz", folder / "valid_500K.extxyz"
    return f"--data.init_args.train_paths={train}", f"--data.init_args.val_paths={valid}", (
        f"--data.init_args.test_paths=[{tests}]")  # fmt: skip


class Molecule:
    """One molecule's data folder and stage folder; trains and tests each model at a seed."""

    def __init__(self, folder: Path, stage: Path, budget_s: float, md_ps: float, smoke: bool) -> None:
        self.folder, self.stage, self.budget_s, self.md_ps, self.smoke = folder, stage, budget_s, md_ps, smoke
        self.tests, self.valid = [folder / test for test in TESTS], folder / "valid_500K.extxyz"

    def record(self, model: str, seed: int) -> dict:
        """``model``'s (``e2former`` or ``mace``) record at ``seed``, cached in its ``stage.json``."""
        path = self.stage / f"{model}_seed{seed}" / "stage.json"
        if path.exists():
            print(f"reusing {path}", flush=True)
            return json.loads(path.read_text())
        record = self.e2former(seed) if model == "e2former" else self.mace(seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1))
        return record

    def e2former(self, seed: int) -> dict:
        extra = (*data_overrides(self.folder), *(SMOKE if self.smoke else ()))
        folder = self.stage / f"e2former_seed{seed}"
        checkpoint, epochs, seconds = train_e2former(folder, self.budget_s, 1 if self.smoke else None, seed=seed,
                                                     extra=extra)  # fmt: skip
        result = evaluate("sciml", checkpoint, sys.executable, self.md_ps, folder / "eval.log",
                          20 if self.smoke else 0, self.tests, self.valid)  # fmt: skip
        return {**result, "epochs": epochs, "seconds": seconds}

    def mace(self, seed: int) -> dict:
        files = mace_files(self.folder, list(RUNS), self.stage / "mace_data")
        folder = self.stage / f"mace_seed{seed}"
        model, epochs, seconds, _ = train_mace(files, folder, self.budget_s, 1 if self.smoke else None, "float32",
                                               timed, seed=seed)  # fmt: skip
        result = evaluate("mace", model, str(mace_python()), self.md_ps, folder / "eval.log",
                          20 if self.smoke else 0, self.tests, self.valid)  # fmt: skip
        return {**result, "epochs": epochs, "seconds": seconds}


def compare_molecules(molecules: list[str], seeds_on: list[str], out: Path, budget_s: float, md_ps: float,
                      smoke: bool) -> dict:  # fmt: skip
    """Every molecule's E2Former and MACE records: ``{molecule: {"e2former_seed0": ..., "mace_seed0": ...}}``;
    the molecules in ``seeds_on`` with a second training seed; a smoke run trains no MACE."""
    records: dict[str, dict] = {}
    for name in molecules:
        molecule = Molecule(molecule_data(name, out, smoke), out / "molecules" / name, budget_s, md_ps, smoke)
        records[name] = {}
        for seed in (0, 1) if name in seeds_on else (0,):
            for model in ("e2former",) if smoke else ("e2former", "mace"):
                records[name][f"{model}_seed{seed}"] = molecule.record(model, seed)
    return records


def both_halves(result: dict, key: str) -> float:
    """``key`` over both test files of ``result`` (weighted by their frames)."""
    halves = list(result["test"].values())
    return sum(h[key] * h["frames"] for h in halves) / sum(h["frames"] for h in halves)


def molecule_rows(records: dict) -> tuple[list[list[str]], dict[str, float]]:
    """The table (one row per molecule, model, seed and test temperature) and the RESULT values."""
    rows, force_ratios, energy_ratios = [], [], []
    for name, runs in records.items():
        for run, result in runs.items():
            model, seed = run.rsplit("_seed", 1)
            for k, (path, half) in enumerate(result["test"].items()):
                first = (
                    [name, model, seed, str(result["epochs"]), f"{result['seconds'] / 60:.1f}"] if not k else [""] * 5
                )
                rows.append(first + [Path(path).stem[5:], f"{half['force_mae_mev_per_a']:.2f}",
                                     f"{half['energy_mae_mev_per_atom']:.3f}"])  # fmt: skip
        for seed in sorted({run.rsplit("_seed", 1)[1] for run in runs}):
            e2former, mace = runs.get(f"e2former_seed{seed}"), runs.get(f"mace_seed{seed}")
            if e2former and mace:
                force_ratios.append(
                    both_halves(e2former, "force_mae_mev_per_a") / both_halves(mace, "force_mae_mev_per_a")
                )
                energy_ratios.append(both_halves(e2former, "energy_mae_mev_per_atom")
                                     / both_halves(mace, "energy_mae_mev_per_atom"))  # fmt: skip
    nan = float("nan")
    result = {"force_mae_ratio_vs_mace_mean": _mean(force_ratios),
              "force_mae_ratio_vs_mace_worst": max(force_ratios, default=nan),
              "energy_mae_ratio_vs_mace_mean": _mean(energy_ratios),
              "energy_mae_ratio_vs_mace_worst": max(energy_ratios, default=nan), "systems": len(records)}  # fmt: skip
    return rows, result


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


HEADER = ["molecule", "model", "seed", "epochs", "train min", "test", "F MAE meV/Å", "E MAE meV/atom"]
