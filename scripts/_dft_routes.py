"""The routes to a DFT-level model of one molecule, side by side: ``bench_dft.py``'s routes stage (issue 56).

Data: ``data/<name>_dft/`` (``generate_dft_sets.py``): a 1000-frame pool at 500 K in shuffled order, validation
at 500 K, tests at 400 K and 600 K, every frame with its DFT and its GFN2-xTB labels. Routes, each a stage of
``<work>/<route>/stage.json`` (the benchmark resumes at the first unfinished one):

- ``passive_<N>``: E2Former (``configs/e2former/<name>_dft.yaml``, the library's defaults) on the first N pool
  frames (a random part of the pool), trained for ``--budget`` minutes;
- ``mace_<N>``: MACE 0.3.16 in float32 (its better row in ``accuracy_vs_mace_40min.md``) on the same frames
  for the same minutes;
- ``delta_<N>``: E2Former on the DFT - GFN2-xTB difference of the same N frames, tested as GFN2-xTB + model
  (an MD step then costs a GFN2-xTB call as well: the table gives it);
- ``dft_alone``: ``sciml learn --config configs/learn/<name>_dft.yaml --pretrain none``: on-the-fly learning
  with the DFT oracle alone;
- ``two_level``: the same config with ``--transfer fine-tune``: GFN2-xTB first, then DFT where the fine-tuned
  model is uncertain;
- ``two_level_difference``: the same config with ``--transfer difference``: GFN2-xTB first, then DFT - GFN2-xTB
  where that difference is uncertain on frames of the GFN2-xTB model's MD, distilled into one model;
- ``two_level_composite``: ``two_level_difference``'s ``composite.ckpt`` (the same run, no further DFT call):
  GFN2-xTB + the final difference model, without the distillation (an MD step then costs a GFN2-xTB call as well);
- ``distill_<N>``: E2Former on the whole pool's geometries, N of them with their DFT labels and the rest with
  GFN2-xTB + ``delta_<N>``'s model: the difference learned from N DFT calls, distilled into one model whose MD
  needs no GFN2-xTB call;
- ``refit_<learning route>``: E2Former as ``passive_<N>`` on that route's DFT store (its labels, no new calls).

Every learning route's round models are tested too, so each route is a curve of test force MAE against DFT
calls (a round's calls: the frames its model trained on). DFT labels go through one label cache
(``runs/dft_labels``), so a resumed route pays for nothing twice; the oracle minutes of the passive routes are
their frames' share of the labelling time ``generate_dft_sets.py`` recorded.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import ase.io
from _accuracy_mace import mace_files, mace_python, train_mace
from bench_accuracy import evaluate, timed, train_e2former

ROOT = Path(__file__).resolve().parents[1]
TESTS = ("test_400K.extxyz", "test_600K.extxyz")
LEARNING_ROUTES = ("dft_alone", "two_level", "two_level_difference")
SMOKE_FIT = ("--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1")
SMOKE_LEARN = ["--rounds", "1", "--seed-frames", "4", "--epochs", "1", "--epochs-per-round", "1",
               "--final-epochs", "1", "--ramp-ps", "0.005", "--hold-ps", "0.005", "--threshold", "1e-4", "--cap",
               "2", "--confirmations", "0", "--calibration-frames", "0", "--time-budget", "30"]  # fmt: skip


class Routes:
    """The routes of one molecule: its data folder, its two configs, the work folder, the training budget
    (seconds), the ps of each final model's NVE run and the DFT label cache; ``smoke``: every training one epoch
    of two batches, every learning run one round of two picks (water at PBE/STO-3G); ``recorded``: the records of
    a results file (``dft_routes_<name>.json``) a route without a ``stage.json`` is taken from (a new machine)."""

    def __init__(
        self, name: str, data: Path, work: Path, budget_s: float, md_ps: float, label_cache: Path, smoke: bool = False,
        recorded: dict[str, dict] | None = None,
    ) -> None:  # fmt: skip
        self.name, self.data, self.work, self.budget_s, self.md_ps = name, data, work, budget_s, md_ps
        self.label_cache, self.smoke, self.recorded = label_cache, smoke, recorded or {}
        self.fit_config = f"configs/e2former/{'ethanol' if smoke else name}_dft.yaml"
        self.learn_config = ROOT / "configs" / "learn" / f"{'ethanol' if smoke else name}_dft.yaml"
        self.tests = [data / test for test in TESTS]

    def stage(self, route: str) -> dict:
        """The record of ``route`` (``passive_<N>``, ``delta_<N>``, ``distill_<N>``, ``mace_<N>``, a learning route
        or ``refit_<learning route>``),
        read from its ``stage.json`` when a run before finished it (or from ``recorded``)."""
        record_path = self.work / route / "stage.json"
        if not record_path.exists() and route in self.recorded:
            print(f"{route}: reusing the record of the results file", flush=True)
            record_path.parent.mkdir(parents=True, exist_ok=True)
            record_path.write_text(json.dumps(self.recorded[route], indent=1))
        if record_path.exists():
            print(f"{route}: reusing {record_path}", flush=True)
            record = json.loads(record_path.read_text())
            if "rotor" not in record and not route.startswith("delta") and not self.smoke:  # from before the scan
                record["rotor"] = self.scan_of(route, record)
                record_path.write_text(json.dumps(record, indent=1))
            return record
        kind, _, count = route.partition("_")
        start = time.perf_counter()
        if kind in ("passive", "delta"):
            record = self.passive(int(count), delta=kind == "delta")
        elif kind == "distill":
            record = self.distill(int(count))
        elif kind == "mace":
            record = self.mace(int(count))
        elif kind == "refit" and count in LEARNING_ROUTES:
            record = self.refit(count)
        elif route in LEARNING_ROUTES:
            record = self.learn(route)
        elif route == "two_level_composite":
            record = self.composite()
        else:
            raise SystemExit(
                f"unknown route '{route}': passive_N, delta_N, distill_N, mace_N, {', '.join(LEARNING_ROUTES)}, "
                "two_level_composite or refit_<learning route>"
            )
        record["route"] = route
        record["stage_wall_seconds"] = time.perf_counter() - start
        record_path.parent.mkdir(parents=True, exist_ok=True)
        record_path.write_text(json.dumps(record, indent=1))
        return record

    def scan_of(self, route: str, record: dict) -> dict:
        """The relaxed torsion scan of a route's final model (a record written before scans were made)."""
        model = Path(record.get("model") or self.work / route / "run" / "model.ckpt")
        kind, python = ("mace", str(mace_python())) if route.startswith("mace") else ("sciml", sys.executable)
        valid = self.data / "valid_500K.extxyz"
        log = self.work / route / "scan.log"
        return evaluate(kind, model, python, 0.0, log, 0, [], valid, self.rotor_scan())["rotor"]

    def rotor_scan(self) -> tuple[str, ...]:
        """``_accuracy_eval.py``'s arguments for the molecule's relaxed torsion scan (``_rotor.TORSIONS``) from
        the first validation frame (none for the smoke's water)."""
        return () if self.smoke else ("--rotor-scan", str(self.data / "valid_500K.extxyz"), "--torsion", self.name)

    def reference_scan(self) -> dict:
        """The DFT level's own relaxed torsion scan (``rotor_scan``), cached in ``<work>/dft_scan.json``."""
        path = self.work / "dft_scan.json"
        if self.smoke:
            return {}
        if not path.exists():
            level = json.loads((self.data / "test_400K.extxyz.provenance.json").read_text())["method"]
            model = level.split("labels: PySCF ")[-1].split(" ")[0]  # "PBE/def2-SVP"
            valid = self.data / "valid_500K.extxyz"
            result = evaluate("pyscf", Path(model), sys.executable, 0.0, self.work / "dft_scan.log", 0, [], valid,
                              self.rotor_scan())  # fmt: skip
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(result["rotor"], indent=1))
        return json.loads(path.read_text())

    def label_seconds(self) -> float:
        """Seconds of DFT per frame: wall time on the labelling pool over the labels computed (not read from the
        cache), over the timed files of the molecule's DFT sets labelled in MD order (their provenance), as a user
        labels a passive run's frames: each SCF starts from its neighbour's density. The pool is labelled
        shuffled (an interrupted run keeps a random part of it), which costs more a label; it counts only when no
        file in MD order was timed."""
        timed = [json.loads(path.read_text()) for path in sorted(self.data.glob("*.extxyz.provenance.json"))]
        timed = [provenance for provenance in timed if provenance.get("label_seconds") is not None]
        in_order = [provenance for provenance in timed if provenance.get("order") == "MD order"]
        chosen = in_order or timed
        seconds = sum(provenance["label_seconds"] for provenance in chosen)
        labels = sum(p["frames"] + p.get("failed_scf", 0) - p.get("labels_from_cache", 0) for p in chosen)
        return seconds / max(labels, 1)

    def pool_part(self, count: int, delta: bool = False) -> Path:
        """The first ``count`` pool frames as a file (``delta``: labelled with the DFT - GFN2-xTB difference)."""
        folder = self.work / "data"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"pool_{count}{'_delta' if delta else ''}.extxyz"
        if not path.exists():
            frames = ase.io.read(self.data / "pool_500K.extxyz", index=f":{count}")
            ase.io.write(path, [difference(frame) for frame in frames] if delta else frames, format="extxyz")
        return path

    def delta_file(self, name: str) -> Path:
        """The data file ``name`` labelled with the DFT - GFN2-xTB difference."""
        path = self.work / "data" / f"delta_{name}"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            frames = ase.io.read(self.data / name, index=":")
            ase.io.write(path, [difference(frame) for frame in frames], format="extxyz")
        return path

    def passive(self, count: int, delta: bool = False) -> dict:
        """E2Former on the first ``count`` pool frames (their difference labels with ``delta``)."""
        folder = self.work / f"{'delta' if delta else 'passive'}_{count}"
        result = self.fit(self.pool_part(count, delta), folder, delta)
        minutes = {"oracle": count * self.label_seconds() / 60, "training": result.pop("seconds") / 60, "md": 0.0}
        return {**result, "dft_calls": count, "minutes": minutes}

    def refit(self, source: str) -> dict:
        """E2Former (the passive recipe) on the DFT store of the learning route ``source``: what a user who ran
        ``sciml learn`` and then ``sciml fit`` on its labels gets. Its DFT calls and minutes are the source's, its
        training minutes the two together."""
        record = self.stage(source)
        store = self.work / source / "run" / "labelled.extxyz"
        result = self.fit(store, self.work / f"refit_{source}")
        minutes = dict(record["minutes"])
        minutes["training"] += result.pop("seconds") / 60
        return {**result, "dft_calls": record["dft_calls"], "minutes": minutes}

    def distill(self, count: int) -> dict:
        """E2Former (the passive recipe) on every pool geometry, the first ``count`` with their DFT labels and the
        rest with GFN2-xTB + the ``delta_<count>`` model's difference: the difference learned from ``count`` DFT
        calls, distilled into one model whose MD needs nothing else. Its minutes: ``delta_<count>``'s and this
        training's (the GFN2-xTB labels of the rest: milliseconds each, not counted)."""
        record = self.stage(f"delta_{count}")
        train = self.distilled_pool(count, Path(record["model"]))
        result = self.fit(train, self.work / f"distill_{count}")
        minutes = dict(record["minutes"])
        minutes["training"] += result.pop("seconds") / 60
        return {**result, "dft_calls": count, "minutes": minutes}

    def distilled_pool(self, count: int, delta_model: Path) -> Path:
        """The pool of :meth:`distill` as a file: its first ``count`` frames with their DFT labels, every other
        one's DFT labels replaced by GFN2-xTB + ``delta_model``'s prediction (the pool's DFT labels unread)."""
        from ase.calculators.singlepoint import SinglePointCalculator

        from sciml.calculators import SciMLCalculator

        path = self.work / "data" / f"pool_distilled_{count}.extxyz"
        if path.exists():
            return path
        calculator = SciMLCalculator.from_checkpoint(delta_model, dtype="float64")
        frames = ase.io.read(self.data / "pool_500K.extxyz", index=":")
        for frame in frames[count:]:
            difference_frame = frame.copy()
            difference_frame.calc = calculator
            energy = frame.info["xtb_energy"] + difference_frame.get_potential_energy()
            forces = frame.arrays["xtb_forces"] + difference_frame.get_forces()
            frame.calc = SinglePointCalculator(frame, energy=energy, forces=forces)
        path.parent.mkdir(parents=True, exist_ok=True)
        ase.io.write(path.with_suffix(".partial"), frames, format="extxyz")
        path.with_suffix(".partial").replace(path)
        return path

    def fit(self, train: Path, folder: Path, delta: bool = False) -> dict:
        """E2Former (``fit_config``) on the labelled frames of ``train`` for the budget, tested (NVE and the rotor
        scan unless ``delta``); its ``seconds`` of training."""
        valid = self.delta_file("valid_500K.extxyz") if delta else self.data / "valid_500K.extxyz"
        tests = [self.delta_file(test) for test in TESTS] if delta else self.tests
        paths = [f"--data.init_args.train_paths={train}", f"--data.init_args.val_paths={valid}",
                 f"--data.init_args.test_paths=[{','.join(str(t) for t in tests)}]"]  # fmt: skip
        extra = (*paths, *(SMOKE_FIT if self.smoke else ()))
        epochs = 1 if self.smoke else None
        checkpoint, epochs, seconds = train_e2former(folder, self.budget_s, epochs, extra=extra,
                                                     config=self.fit_config)  # fmt: skip
        md_ps = 0.0 if delta else self.md_ps  # a difference model alone has no dynamics of its own
        scan = () if delta else self.rotor_scan()
        result = evaluate("sciml", checkpoint, sys.executable, md_ps, folder / "eval.log", 0, tests, valid, scan)
        result["test"] = {Path(path).name.removeprefix("delta_"): value for path, value in result["test"].items()}
        return {**result, "epochs": epochs, "seconds": seconds, "model": str(checkpoint)}

    def mace(self, count: int) -> dict:
        """MACE float32 on the first ``count`` pool frames for the same budget."""
        folder = self.work / f"mace_{count}"
        files = mace_files(self.work / "data", [self.pool_part(count).name], folder / "data")
        files |= mace_files(self.data, ["valid_500K.extxyz"], folder / "data")
        model, epochs, seconds, _ = train_mace(files, folder, self.budget_s, 1 if self.smoke else None, "float32",
                                               timed, train=self.pool_part(count).name)  # fmt: skip
        result = self.final_tests("mace", model, folder)
        minutes = {"oracle": count * self.label_seconds() / 60, "training": seconds / 60, "md": 0.0}
        return {**result, "dft_calls": count, "epochs": epochs, "minutes": minutes, "model": str(model)}

    def learn(self, route: str) -> dict:
        """``sciml learn`` with the molecule's learn config (``dft_alone``: ``--pretrain none``; ``two_level``:
        ``--transfer fine-tune``; ``two_level_difference``: ``--transfer difference``), then the final model and
        every fine-tuning round's model on the tests (a difference route's rounds model the difference alone)."""
        folder, two_level = self.work / route, route != "dft_alone"
        command = [sys.executable, "-m", "sciml", "learn", "--config", str(self.learn_config), "--output",
                   str(folder / "run"), "--label-cache", str(self.label_cache), "--no-progress"]  # fmt: skip
        command += ["--pretrain", "none"] if not two_level else []
        command += ["--transfer", "difference" if route == "two_level_difference" else "fine-tune"]
        if self.smoke:
            command += ["--smiles", "O", "--basis", "sto-3g", *SMOKE_LEARN]
            command += ["--pool-frames", "6", "--pool-spacing-fs", "1", "--transfer-rounds", "1", "--transfer-cap", "2",
                        "--difference-epochs", "1", "--calibration-frames", "2"]  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
        wall = timed(command, folder / "learn.log")
        run = folder / "run"
        summary = json.loads((run / "summary.json").read_text())
        levels = summary["levels"] if two_level else [{"oracle": "DFT", "seconds": summary["seconds"],
                                                        "oracle_calls": summary["oracle_calls"]}]  # fmt: skip
        result = self.final_tests("sciml", run / "model.ckpt", folder)
        valid = self.data / "valid_500K.extxyz"
        curve = []
        rounds = [] if route == "two_level_difference" else json.loads((run / "state.json").read_text())["rounds"]
        for record in rounds:
            model = run / f"round{record['round']}" / "model.ckpt"
            if model.exists() and record.get("frames_trained"):
                point = evaluate("sciml", model, sys.executable, 0.0, folder / f"eval_round{record['round']}.log",
                                 0, self.tests, valid)  # fmt: skip
                curve.append({"dft_calls": record["frames_trained"], "force_mae_mev_per_a": mean_force_mae(point)})
        minutes = {phase: levels[-1]["seconds"].get(phase, 0.0) / 60 for phase in ("oracle", "training", "md")}
        if two_level:
            minutes |= {f"pretrain_{phase}": levels[0]["seconds"].get(phase, 0.0) / 60
                        for phase in ("oracle", "training", "md")}  # fmt: skip
        check = run / "final" / "check.json"
        extra = {"held_out_check": json.loads(check.read_text())} if check.exists() else {}
        return {**result, "dft_calls": levels[-1]["oracle_calls"], "curve": curve, "minutes": minutes,
                "wall_minutes": wall / 60, "levels": levels, "model": str(run / "model.ckpt"), **extra}  # fmt: skip

    def final_tests(self, kind: str, model: Path, folder: Path) -> dict:
        """A route's final ``model`` (``kind``: ``"sciml"`` or ``"mace"``) on the tests (keyed by file name), its NVE
        run and the rotor scan, logged in ``<folder>/eval.log``."""
        python = str(mace_python()) if kind == "mace" else sys.executable
        result = evaluate(kind, model, python, self.md_ps, folder / "eval.log", 0, self.tests,
                          self.data / "valid_500K.extxyz", self.rotor_scan())  # fmt: skip
        result["test"] = {Path(path).name: value for path, value in result["test"].items()}
        return result

    def composite(self) -> dict:
        """``two_level_difference``'s ``composite.ckpt`` (GFN2-xTB + its final difference model) on the tests, NVE
        and the scan; its DFT calls and minutes are that run's, its held-out check ``difference/check.json``."""
        record = self.stage("two_level_difference")
        run, folder = self.work / "two_level_difference" / "run", self.work / "two_level_composite"
        model = run / "composite.ckpt"
        if not model.exists():
            raise SystemExit(f"{model} is missing: a run from before composites; run `sciml learn` on it again (it "
                             "resumes, calls no DFT and writes the composite)")  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
        result = self.final_tests("sciml", model, folder)
        check = json.loads((run / "difference" / "check.json").read_text())
        return {**result, "dft_calls": record["dft_calls"], "curve": [], "minutes": record["minutes"],
                "levels": record["levels"], "model": str(model), "held_out_check": check}  # fmt: skip


def difference(frame):
    """``frame`` labelled with its DFT - GFN2-xTB energy (eV) and forces (eV/Å) (``xtb_energy``,
    ``xtb_forces``: the GFN2-xTB labels generate_dft_sets.py keeps)."""
    from ase.calculators.singlepoint import SinglePointCalculator

    if "xtb_energy" not in frame.info or "xtb_forces" not in frame.arrays:
        raise ValueError("a frame without xtb_energy / xtb_forces: made by an older generate_dft_sets.py?")
    energy = frame.get_potential_energy() - frame.info["xtb_energy"]
    forces = frame.get_forces() - frame.arrays["xtb_forces"]
    bare = frame.__class__(frame.numbers, frame.positions, cell=frame.cell, pbc=frame.pbc)
    bare.calc = SinglePointCalculator(bare, energy=energy, forces=forces)
    return bare


def mean_force_mae(result: dict) -> float:
    """Force MAE (meV/Å) over every test frame of ``result`` (the halves weighted by their frames)."""
    halves = list(result["test"].values())
    return sum(h["force_mae_mev_per_a"] * h["frames"] for h in halves) / sum(h["frames"] for h in halves)


def xtb_ms_per_step(frame) -> float:
    """Milliseconds of one GFN2-xTB energy + forces call on ``frame`` (tblite, the mean of 20 after one)."""
    from tblite.ase import TBLite

    atoms = frame.copy()
    atoms.calc = TBLite(method="GFN2-xTB", verbosity=0)
    atoms.get_forces()
    start = time.perf_counter()
    for _ in range(20):
        atoms.positions += 1e-4
        atoms.get_forces()
    return (time.perf_counter() - start) / 20 * 1e3


def plot_routes(records: dict[str, dict], path: Path, title: str) -> None:
    """Test force MAE (both temperatures) against DFT calls, every route on one log-log plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for kind, marker in (("passive", "o-"), ("delta", "s--"), ("distill", "P-"), ("mace", "D")):
        points = sorted((r["dft_calls"], mean_force_mae(r)) for k, r in records.items() if k.startswith(kind + "_"))
        if points:
            label = {"passive": "passive (E2Former)", "delta": "passive, DFT - xTB (E2Former)", "mace": "MACE",
                     "distill": "DFT - xTB distilled into one model"}[kind]  # fmt: skip
            axes.plot(*zip(*points, strict=True), marker, label=label)
    labels = {"dft_alone": ("on the fly, DFT alone", "v-"), "two_level": ("two levels, fine-tuned", "^-"),
              "two_level_difference": ("two levels, DFT - xTB distilled", "h-"),
              "two_level_composite": ("two levels, xTB + (DFT - xTB)", "X")}  # fmt: skip
    for route, (label, marker) in labels.items():
        if route in records:
            record = records[route]
            curve = [(p["dft_calls"], p["force_mae_mev_per_a"]) for p in record["curve"]]
            curve.append((record["dft_calls"], mean_force_mae(record)))
            axes.plot(*zip(*curve, strict=True), marker, label=label, markersize=9 if not record["curve"] else 6)
    for route, record in records.items():
        if route.startswith("refit_"):
            label = f"{route.removeprefix('refit_').replace('_', ' ')}, store refitted"
            axes.plot(record["dft_calls"], mean_force_mae(record), "*", markersize=11, label=label)
    axes.set(xscale="log", yscale="log", xlabel="DFT calls", ylabel="test force MAE, 400 K + 600 K (meV/Å)")
    axes.set_title(title)
    axes.grid(alpha=0.3, which="both")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def route_rows(records: dict[str, dict], xtb_ms: float) -> list[list[str]]:
    """One table row per route and test temperature."""
    rows = []
    for route, record in records.items():
        minutes = record["minutes"]
        pretrain = sum(v for k, v in minutes.items() if k.startswith("pretrain_"))
        nve = record.get("nve", {})
        drift = f"{nve['drift_mev_per_atom_ps']:.3f}" if "drift_mev_per_atom_ps" in nve else "-"
        drift += " (blew up)" if nve.get("blew_up") else ""
        with_xtb = route.startswith("delta") or route == "two_level_composite"
        md_cost = f"+ GFN2-xTB ({xtb_ms:.1f} ms/step)" if with_xtb else "model only"
        for k, test in enumerate(TESTS):
            half = record["test"][test]
            first = [route, str(record["dft_calls"]), f"{minutes['oracle']:.1f}", f"{minutes['training']:.1f}",
                     f"{minutes['md']:.1f}", f"{pretrain:.1f}" if pretrain else "-"] if not k else [""] * 6  # fmt: skip
            rotor = record.get("rotor", {})
            barrier = rotor.get("barrier_mev", rotor.get("barrier_gauche_to_trans_mev"))  # the latter: before 12-2026
            barrier = f"{barrier:.0f}" if barrier is not None else "-"
            rows.append(first + [test[5:9], f"{half['force_mae_mev_per_a']:.1f}",
                                 f"{half['energy_mae_mev_per_atom']:.2f}", drift if not k else "",
                                 barrier if not k else "", md_cost if not k else ""])  # fmt: skip
    return rows


HEADER = ["route", "DFT calls", "DFT oracle min", "training min", "MD min", "GFN2-xTB level min", "test",
          "F MAE meV/Å", "E MAE meV/atom", "NVE drift meV/atom/ps", "torsion barrier meV", "MD step needs"]  # fmt: skip


def result_line(records: dict[str, dict], oracle_speedup: float, two_level_route: str) -> dict[str, float]:
    """The RESULT values: ``two_level_route`` (the one the learn config takes) against the largest passive set,
    E2Former against MACE on it; with a ``two_level_composite`` record, its force error against the passive set's
    too (``force_mae_ratio_vs_passive_composite``: GFN2-xTB + the difference, an MD step needing both)."""
    nan = float("nan")
    passive = max((r for k, r in records.items() if k.startswith("passive_")), key=lambda r: r["dft_calls"],
                  default=None)  # fmt: skip
    mace = records.get(f"mace_{passive['dft_calls']}") if passive else None
    two_level = records.get(two_level_route)
    result = {"oracle_speedup_vs_plain_pyscf": oracle_speedup}
    if passive and two_level:
        result["dft_calls_ratio_vs_passive"] = two_level["dft_calls"] / passive["dft_calls"]
        result["force_mae_ratio_vs_passive"] = mean_force_mae(two_level) / mean_force_mae(passive)
    if passive and mace:
        result["force_mae_ratio_vs_mace_same_labels"] = mean_force_mae(passive) / mean_force_mae(mace)
    if two_level:
        minutes = two_level["minutes"]
        result["minutes_to_dft_model"] = sum(minutes.values())
    keys = ("dft_calls_ratio_vs_passive", "force_mae_ratio_vs_passive", "force_mae_ratio_vs_mace_same_labels",
            "oracle_speedup_vs_plain_pyscf", "minutes_to_dft_model")  # fmt: skip
    composite = records.get("two_level_composite")
    if passive and composite:
        result["force_mae_ratio_vs_passive_composite"] = mean_force_mae(composite) / mean_force_mae(passive)
        keys += ("force_mae_ratio_vs_passive_composite",)
    return {key: result.get(key, nan) for key in keys}
