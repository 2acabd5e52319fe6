"""The `sciml` command: every config in configs/ runs on a tiny budget; bad keys fail clearly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sciml.cli import run

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted((ROOT / "configs/e2former/presets").glob("*.yaml"))  # model fragments, not whole configs
LEARN = sorted((ROOT / "configs/learn").glob("*.yaml"))  # `sciml learn` options: tests/active/test_loop.py
CONFIGS = sorted(set((ROOT / "configs").rglob("*.yaml")) - set(PRESETS) - set(LEARN))
TINY = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=3",
    "--trainer.limit_val_batches=2",
    "--trainer.enable_progress_bar=false",
    "--trainer.logger=false",
]


@pytest.fixture(autouse=True)
def _plain_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["sciml"])  # pytest's own argv is not meant for the CLI


@pytest.mark.parametrize("config", CONFIGS, ids=[str(c.relative_to(ROOT / "configs")) for c in CONFIGS])
def test_every_config_fits_on_a_tiny_budget(config, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    cli = run(["fit", "--config", str(config), f"--trainer.default_root_dir={tmp_path}", *TINY])
    assert cli.trainer.state.finished and cli.trainer.global_step == 3
    assert all(v.isfinite() for v in cli.trainer.callback_metrics.values())


def test_preset_files_state_the_named_presets():
    import yaml

    from sciml.models.e2former.model import PRESETS as NAMED

    assert sorted(NAMED) == sorted(p.stem for p in PRESETS)
    for preset in PRESETS:
        expected = {"class_path": "sciml.models.E2Former", "init_args": NAMED[preset.stem]}
        assert yaml.safe_load(preset.read_text()) == expected, preset.name


def test_a_preset_file_is_the_named_model_and_trains_from_the_cli(monkeypatch, tmp_path):
    """``--model.init_args.model configs/e2former/presets/large.yaml`` on a config that sets other sizes
    (quickstart: C 32, 2 layers) builds ``E2Former.preset("large")`` with the data's links: the files state
    every size, so they replace the config's."""
    from sciml.models import E2Former

    monkeypatch.chdir(ROOT)
    config = [
        "fit",
        "--config",
        "configs/e2former/quickstart.yaml",
        "--model.init_args.model=configs/e2former/presets/large.yaml",
    ]
    cli = run([*config, f"--trainer.default_root_dir={tmp_path}", *TINY])
    assert cli.trainer.state.finished and cli.trainer.global_step == 3
    data = cli.datamodule
    expected = E2Former.preset("large", data.species, cutoff=data.cutoff, avg_neighbours=data.avg_neighbours)
    linked = {"energy_reference", "energy_scale"}  # values from the training split, checked elsewhere
    assert {k: v for k, v in cli.model.model.config.items() if k not in linked} == {
        k: v for k, v in expected.config.items() if k not in linked
    }


@pytest.mark.parametrize("flag", ["--config", "-c"])
def test_lagtime_is_linked_from_data_to_model(flag, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    cli = run(
        [
            "fit",
            flag,
            "configs/koopman/ou.yaml",
            "--data.init_args.lagtime=3",
            f"--trainer.default_root_dir={tmp_path}",
            *TINY,
        ]
    )
    assert cli.model.hparams.lagtime == 3 == cli.datamodule.lagtime


def test_unknown_config_key_is_refused(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "configs/koopman/ou.yaml").read_text().replace("batch_size: 256", "batch_sise: 256"))
    result = subprocess.run(
        [sys.executable, "-m", "sciml", "fit", "--config", str(bad)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode != 0
    assert "batch_sise" in result.stderr


def test_print_config_round_trips(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sciml",
            "fit",
            "--config",
            str(ROOT / "configs/koopman/ou.yaml"),
            "--print_config",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    dumped = tmp_path / "dumped.yaml"
    dumped.write_text(result.stdout)
    assert "sciml.data.systems.OrnsteinUhlenbeck" in result.stdout
    again = subprocess.run(
        [sys.executable, "-m", "sciml", "fit", "--config", str(dumped), "--print_config"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert again.stdout == result.stdout


def test_remote_checkpoint_paths_are_refused(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError, match="'https://example.org/model.ckpt' is a remote address"):
        run(["validate", "-c", "configs/koopman/ou.yaml", "--ckpt_path", "https://example.org/model.ckpt", *TINY[3:]])


def test_links_follow_the_parsed_model_classes_not_the_command_line_text(monkeypatch, tmp_path):
    """The model is given as inline YAML (no class path on the command line to scan): the E2Former inside still
    gets species, cutoff and the energy reference from the data module."""
    monkeypatch.chdir(ROOT)
    model = (
        "{class_path: sciml.training.PotentialModule, init_args: {model: {class_path: sciml.models.E2Former, "
        "init_args: {channels: 8, lmax: 1, layers: 1, heads: 2}}}}"
    )
    data = "{class_path: sciml.data.AtomsDataModule, init_args: {paths: data/ethanol_gfn2.extxyz, cutoff: 3.5}}"
    cli = run(["fit", f"--model={model}", f"--data={data}", f"--trainer.default_root_dir={tmp_path}", *TINY])
    backbone = cli.model.model
    assert backbone.species == cli.datamodule.species == [1, 6, 8]
    assert backbone.cutoff == 3.5
    assert backbone.config["energy_reference"] == cli.datamodule.energy_reference  # (re-levelled during the fit)


def test_data_links_are_collected_from_nested_classes():
    from jsonargparse import Namespace

    from sciml.cli import data_links

    encoder = Namespace(class_path="sciml.koopman.MolecularEncoder", init_args=Namespace(output_dim=3))
    given = Namespace(class_path="sciml.koopman.MolecularEncoder", init_args=Namespace(avg_neighbours=12.0))
    config = Namespace(
        class_path="sciml.training.KoopmanModule", init_args=Namespace(encoder_f=encoder, encoder_g=given)
    )
    assert data_links(config) == {
        "model.init_args.lagtime": "lagtime",
        "model.init_args.encoder_f.init_args.species": "species",
        "model.init_args.encoder_f.init_args.cutoff": "cutoff",
        "model.init_args.encoder_f.init_args.avg_neighbours": "avg_neighbours",
        "model.init_args.encoder_g.init_args.species": "species",
        "model.init_args.encoder_g.init_args.cutoff": "cutoff",  # its avg_neighbours is set: not linked
    }


def test_a_molecular_encoder_on_array_data_names_the_missing_attribute(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    encoder = "{class_path: sciml.koopman.MolecularEncoder, init_args: {output_dim: 2}}"
    with pytest.raises(ValueError, match="takes 'species' from the data module, but ArrayDataModule has none"):
        run(["fit", "-c", "configs/koopman/ou.yaml", f"--model.init_args.encoder_f={encoder}", *TINY])


def test_a_second_run_in_the_same_directory_keeps_the_first_config(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    for lagtime in (2, 3):
        run(
            [
                "fit",
                "-c",
                "configs/koopman/ou.yaml",
                f"--data.init_args.lagtime={lagtime}",
                f"--trainer.default_root_dir={tmp_path}",
                *TINY,
            ]
        )
    assert "lagtime: 2" in (tmp_path / "config.yaml").read_text()
    assert "lagtime: 3" in (tmp_path / "config.1.yaml").read_text()


def test_avg_neighbours_comes_from_the_training_split_unless_the_config_sets_it(monkeypatch, tmp_path):
    """``data.avg_neighbours`` (edges per atom within the cutoff, training split) goes into E2Former like the
    force RMS; a value given in the config wins, and both are recorded in the checkpoint's model spec."""
    from sciml.models import E2Former

    monkeypatch.chdir(ROOT)
    config = ["fit", "--config", "configs/e2former/quickstart.yaml", *TINY]
    linked = run([*config, f"--trainer.default_root_dir={tmp_path / 'linked'}"])
    data, model = linked.datamodule, linked.model.model
    split = data.dataset("train")
    by_hand = sum(split[k].edge_index.shape[1] for k in range(len(split))) / sum(
        split[k].num_nodes for k in range(len(split))
    )
    assert data.avg_neighbours == pytest.approx(by_hand, rel=1e-12) and model.avg_neighbours == data.avg_neighbours
    assert model.config["avg_neighbours"] == data.avg_neighbours
    assert data.linked_values(E2Former)["avg_neighbours"] == data.avg_neighbours
    given = run(
        [
            *config,
            f"--trainer.default_root_dir={tmp_path / 'given'}",
            "--model.init_args.model.init_args.avg_neighbours=9.5",
        ]
    )
    assert given.model.model.avg_neighbours == 9.5 == given.model.model.config["avg_neighbours"]
    (checkpoint,) = (tmp_path / "given").rglob("last.ckpt")
    assert torch.load(checkpoint, weights_only=True)["sciml_model"]["init_args"]["avg_neighbours"] == 9.5
