"""The LightningModules outside a Trainer, on partially labelled data, with EMA re-levelling, stopping at
non-finite values and resuming an interrupted run exactly."""

from __future__ import annotations

import ase.io
import lightning as L
import pytest
import torch

from sciml.data import AtomsDataModule
from sciml.koopman import LoRALoss, MLPEncoder
from sciml.models import E2Former
from sciml.training import KoopmanModule, PotentialModule


def test_koopman_training_step_runs_outside_a_trainer():
    """A training step called by hand (a notebook, a custom loop) returns the loss, unscaled."""
    torch.manual_seed(0)
    module = KoopmanModule(MLPEncoder(1, 3, hidden=(8,)), loss=LoRALoss())
    x = torch.randn(32, 1)
    batch = (x, 0.9 * x + 0.1 * torch.randn(32, 1))
    loss = module.training_step(batch, 0)
    f, g = module.features(*batch)
    torch.testing.assert_close(loss, LoRALoss()(f, g))


def potential_module(data: AtomsDataModule, **kwargs) -> PotentialModule:
    torch.manual_seed(0)
    model = E2Former(data.species, data.cutoff, channels=8, lmax=1, layers=1, heads=2, radial_basis=8)
    return PotentialModule(model, **kwargs)


def float64_frames(tmp_path, molecule_frames) -> AtomsDataModule:
    """20 rattled ethanol frames (12 / 4 / 4 by split), float64, batches of 2."""
    ase.io.write(tmp_path / "frames.extxyz", molecule_frames * 4)
    return AtomsDataModule(
        paths=str(tmp_path / "frames.extxyz"), cutoff=3.0, split=(0.6, 0.2, 0.2), batch_size=2, dtype="float64"
    )


def first_batch(paths, **kwargs):
    data = AtomsDataModule(paths=paths, cutoff=3.0, split=(0.5, 0.25, 0.25), batch_size=2, **kwargs)
    return data, next(iter(data.train_dataloader()))


def one_label_file(frames, path, label: str) -> str:
    """Frames keeping only ``label`` (``energy`` in info["dft_energy"], ``forces`` in arrays["dft_forces"])."""
    kept = []
    for atoms in frames:
        frame = atoms.copy()  # the copy has no calculator, so no other label
        if label == "energy":
            frame.info["dft_energy"] = atoms.get_potential_energy()
        else:
            frame.arrays["dft_forces"] = atoms.get_forces()
        kept.append(frame)
    ase.io.write(path, kept)
    return str(path)


def test_potential_loss_uses_only_the_labels_present(tmp_path, molecule_frames):
    """Energy-only data (``labels: [energy]``, no forces stored) trains on energies, and forces-only data on
    forces; the loss equals the hand-computed one for the term that exists."""
    path = one_label_file(molecule_frames, tmp_path / "energy_only.extxyz", "energy")
    data, batch = first_batch(path, labels=["energy"], energy_key="dft_energy")
    assert not hasattr(batch, "forces")
    module = potential_module(data, energy_weight=2.0, force_weight=10.0)
    outputs = module._predict(batch, use_ema=False)
    loss = module._loss(batch, outputs)
    expected = 2.0 * torch.mean(((outputs["energy"] - batch.energy) / batch.natoms) ** 2)
    torch.testing.assert_close(loss, expected)

    path = one_label_file(molecule_frames, tmp_path / "forces_only.extxyz", "forces")
    data, batch = first_batch(path, labels=["forces"], forces_key="dft_forces")
    assert not hasattr(batch, "energy")
    module = potential_module(data, energy_weight=1.0, force_weight=10.0)
    outputs = module._predict(batch, use_ema=False)
    torch.testing.assert_close(module._loss(batch, outputs), 10.0 * torch.mean((outputs["forces"] - batch.forces) ** 2))


def test_potential_loss_without_any_weighted_label_names_what_is_missing(tmp_path, molecule_frames):
    frames = [atoms.copy() for atoms in molecule_frames]  # copies carry no calculator: no labels at all
    ase.io.write(tmp_path / "bare.extxyz", frames)
    data, batch = first_batch(str(tmp_path / "bare.extxyz"), labels=[])
    module = potential_module(data)
    outputs = module._predict(batch, use_ema=False)
    with pytest.raises(ValueError, match=r"no label for any weighted loss term \(energy, forces\)"):
        module._loss(batch, outputs)


def test_koopman_g_encoder_is_freshly_initialised_everywhere():
    """The default g is a new instance built from f's recorded constructor arguments: every randomly
    initialised parameter differs from f's (the equivariant weights had been copied from f before)."""
    from sciml.koopman import MolecularEncoder

    torch.manual_seed(0)
    f = MolecularEncoder([1, 6, 8], 4.0, output_dim=3, backbone={"channels": 8, "layers": 1}, hidden=(8,)).double()
    module = KoopmanModule(f)
    g = module.encoder_g
    assert g is not f and type(g) is type(f) and g.config == f.config
    g_parameters = dict(g.named_parameters())
    random = {name: p for name, p in f.named_parameters() if p.detach().unique().numel() > 1}
    assert any("convolution" in name for name in random)  # the equivariant weights are among them
    for name, p in random.items():
        assert g_parameters[name].dtype == torch.float64
        assert not torch.equal(p, g_parameters[name]), name
    plain = torch.nn.Linear(1, 3)  # no recorded constructor arguments: no silent deep copy
    with pytest.raises(ValueError, match="Linear keeps no `config`"):
        KoopmanModule(plain)
    assert KoopmanModule(plain, share_encoders=True).encoder_g is plain


def test_potential_module_builds_its_force_outputs_once(molecule_frames, tmp_path, monkeypatch):
    """One ForceStressOutput for the live model, one inside the EMA copy; steps build no more."""
    from sciml.nn.forces import ForceStressOutput

    ase.io.write(tmp_path / "frames.extxyz", molecule_frames)
    data, batch = first_batch(str(tmp_path / "frames.extxyz"))
    module = potential_module(data, ema_decay=0.99)
    assert sum(isinstance(m, ForceStressOutput) for m in module.modules()) == 2
    built = []
    original = ForceStressOutput.__init__
    monkeypatch.setattr(ForceStressOutput, "__init__", lambda self, *a, **k: built.append(1) or original(self, *a, **k))
    module.on_train_batch_end(None, batch, 0)  # an EMA update
    module._predict(batch, use_ema=True), module._predict(batch, use_ema=False), module.predict_step(batch, 0)
    assert not built
    assert module.evaluation_model is module.ema.module.model


def test_ema_energies_are_relevelled_on_training_frames_before_validation(tmp_path, molecule_frames):
    """After a validation the EMA model's energy residuals on the training frames have zero mean (one
    composition: the fit is exact), only energy_reference moved, and forces are those of the averaged weights."""
    from sciml.nn.forces import ForceStressOutput
    from sciml.training.energy_shift import fit_energy_shift

    data = float64_frames(tmp_path, molecule_frames)
    module = potential_module(data, ema_decay=0.9, optimizer=torch.optim.SGD).double()
    trainer = L.Trainer(
        max_epochs=1, limit_train_batches=3, logger=False, enable_checkpointing=False, default_root_dir=tmp_path,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
    )  # fmt: skip
    trainer.fit(module, data)
    averaged = module.evaluation_model
    train = list(data.split_dataloader("train"))
    assert float(fit_energy_shift(averaged, train).abs().max()) < 1e-9  # already level
    level = ForceStressOutput(averaged)(train[0])
    averaged.energy_reference += torch.tensor([0.3, -0.1, 0.2], dtype=torch.float64)  # forces unchanged
    moved = ForceStressOutput(averaged)(train[0])
    torch.testing.assert_close(moved["forces"], level["forces"], rtol=0, atol=1e-12)
    assert (moved["energy"] - level["energy"]).abs().min() > 0.1
    averaged.energy_reference += fit_energy_shift(averaged, train)  # (minimum-norm) refit restores the level
    torch.testing.assert_close(averaged(train[0])["energy"], level["energy"], rtol=0, atol=1e-9)
    assert trainer.callback_metrics["val/energy_relevel"] > 0


def tiny_trainer(tmp_path, **kwargs):
    defaults = dict(
        max_epochs=4, logger=False, default_root_dir=tmp_path, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu",
    )  # fmt: skip
    return L.Trainer(**{**defaults, **kwargs})


def test_non_finite_loss_or_gradient_stops_before_the_weights_change(tmp_path, molecule_frames):
    from lightning.pytorch.callbacks import ModelCheckpoint

    from sciml.training.finite import NonFiniteError

    ase.io.write(tmp_path / "frames.extxyz", molecule_frames * 4)
    data = AtomsDataModule(paths=str(tmp_path / "frames.extxyz"), cutoff=3.0, split=(0.6, 0.2, 0.2), batch_size=2)
    module = potential_module(data, ema_decay=0.9)
    original, calls = module._predict, []

    def poisoned(batch, use_ema):  # the third training batch predicts a NaN energy
        outputs = dict(original(batch, use_ema))
        if not use_ema:
            calls.append(1)
            if len(calls) == 3:
                outputs["energy"] = outputs["energy"] * float("nan")
        return outputs

    module._predict = poisoned
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "checkpoints", save_last=True, every_n_train_steps=1)
    with pytest.raises(NonFiniteError, match=r"step 2, epoch 0, batch 2: energy = nan"):
        tiny_trainer(tmp_path, callbacks=[checkpoints]).fit(module, data)
    assert all(torch.isfinite(p).all() for p in module.parameters())
    for path in (tmp_path / "checkpoints").glob("*.ckpt"):  # whatever was saved holds finite weights only
        state = torch.load(path, weights_only=True)["state_dict"]
        assert all(torch.isfinite(value).all() for value in state.values() if value.is_floating_point())

    module = potential_module(data)
    weight = module.model.energy_head[0].weight
    weight.register_hook(lambda grad: grad * float("nan"))
    before = weight.detach().clone()
    with pytest.raises(NonFiniteError, match=r"non-finite gradient at step 0.*first model\.energy_head\.0\.weight"):
        tiny_trainer(tmp_path, enable_checkpointing=False).fit(module, data)
    assert torch.equal(weight.detach(), before)


class StopAfterEpoch(L.Callback):
    """Ends the run gracefully after ``epoch`` (an interruption at an epoch boundary)."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.current_epoch == self.epoch:
            trainer.should_stop = True


def test_interrupted_and_resumed_run_equals_an_uninterrupted_one(tmp_path, molecule_frames):
    """2 + 2 epochs from last.ckpt give the parameters (and EMA) of 4 epochs, float64, to 1e-8: shuffling,
    warm-up + cosine learning rate, EMA warm-up, stage two and energy re-levelling all resume."""
    from functools import partial

    from lightning.pytorch.callbacks import ModelCheckpoint

    from sciml.training.schedules import WarmupCosine

    data = float64_frames(tmp_path, molecule_frames)

    def module():
        return potential_module(
            data,
            ema_decay=0.99,
            optimizer=partial(torch.optim.Adam, lr=2e-3, amsgrad=True),
            scheduler=partial(WarmupCosine, warmup_steps=3),
            stage_two={"start_epoch": 3, "energy_weight": 100.0, "force_weight": 10.0, "lr": 1e-3},
        ).double()

    whole = module()
    tiny_trainer(tmp_path / "whole", enable_checkpointing=False).fit(whole, data)
    first = module()
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "parts", save_last=True)
    tiny_trainer(tmp_path / "parts", callbacks=[checkpoints, StopAfterEpoch(1)]).fit(first, data)
    assert first.current_epoch == 2
    resumed = module()
    resume = tiny_trainer(tmp_path / "parts", enable_checkpointing=False)
    resume.fit(resumed, data, ckpt_path=tmp_path / "parts" / "last.ckpt")
    assert resumed.global_step == whole.global_step
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(), strict=True):
        if a.is_floating_point():
            torch.testing.assert_close(b, a, rtol=0, atol=1e-8, msg=name)
    assert (whole.model.energy_head[0].weight - first.model.energy_head[0].weight).abs().max() > 1e-4


def test_run_checkpoints_keep_the_final_weights_and_resume_where_the_run_stopped(tmp_path, molecule_frames):
    """Validation gets worse in the last epochs (stage two: a learning rate 25x higher and no force term), so
    the best epoch is not the last: ``best.ckpt`` holds the best-by-validation epoch, ``last.ckpt`` the final
    weights and EMA, and resuming from ``last.ckpt`` continues from the final step, not from the best one
    (Lightning's ``ModelCheckpoint(monitor=..., save_last=True)`` rewrites last.ckpt only on a new best)."""
    from functools import partial

    from sciml.calculators.checkpoint import load_model
    from sciml.training.callbacks import RunCheckpoints

    data = float64_frames(tmp_path, molecule_frames)

    def module():
        return potential_module(
            data,
            ema_decay=0.5,
            optimizer=partial(torch.optim.Adam, lr=2e-3),
            stage_two={"start_epoch": 3, "energy_weight": 1.0, "force_weight": 0.0, "lr": 5e-2},
        ).double()

    first, checkpoints = module(), RunCheckpoints(monitor="val/force_mae", mode="min")
    trainer = tiny_trainer(tmp_path / "run", max_epochs=6, callbacks=[checkpoints])
    errors = []
    trainer.callbacks.append(
        L.pytorch.callbacks.LambdaCallback(
            on_validation_end=lambda trainer, _: errors.append(float(trainer.callback_metrics["val/force_mae"]))
        )
    )
    trainer.fit(first, data)
    folder = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == ["best.ckpt", "last.ckpt"]
    best_epoch = min(range(len(errors)), key=errors.__getitem__)
    assert best_epoch < 5 and errors[-1] > errors[best_epoch]  # validation got worse after the best epoch
    last, best = (torch.load(folder / name, weights_only=True) for name in ("last.ckpt", "best.ckpt"))
    assert (last["epoch"], best["epoch"]) == (5, best_epoch)
    assert last["sciml_format_version"] == best["sciml_format_version"] == 3
    assert last["global_step"] == first.global_step
    for name, value in first.state_dict().items():
        torch.testing.assert_close(last["state_dict"][name], value, rtol=0, atol=0, msg=name)
    for name, value in first.evaluation_model.state_dict().items():  # the EMA weights of the last step
        torch.testing.assert_close(last["ema_state_dict"][name], value, rtol=0, atol=0, msg=name)
    final = load_model(folder / "last.ckpt")  # what calculators load: the last EMA model (in float32)
    assert torch.allclose(final.energy_head[0].weight.double(), first.evaluation_model.energy_head[0].weight)

    resumed = module()
    again = tiny_trainer(tmp_path / "run", max_epochs=7, callbacks=[RunCheckpoints()])
    again.fit(resumed, data, ckpt_path=folder / "last.ckpt")
    assert resumed.global_step == first.global_step + first.global_step // 6  # one epoch more, from the end
    assert torch.load(folder / "last.ckpt", weights_only=True)["epoch"] == 6


def test_run_checkpoints_save_a_run_stopped_mid_epoch(tmp_path, molecule_frames):
    """A run that stops between validations (``max_steps``, like ``max_time``) still saves its last step."""
    from sciml.training.callbacks import RunCheckpoints

    ase.io.write(tmp_path / "frames.extxyz", molecule_frames * 4)
    data = AtomsDataModule(paths=str(tmp_path / "frames.extxyz"), cutoff=3.0, split=(0.6, 0.2, 0.2), batch_size=2)
    module = potential_module(data)
    tiny_trainer(tmp_path / "run", max_epochs=3, max_steps=8, callbacks=[RunCheckpoints()]).fit(module, data)
    last = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    assert module.global_step == 8 == last["global_step"]


def test_koopman_module_old_encoder_keyword_warns_and_still_works():
    """``KoopmanModule(encoder=...)`` (renamed ``encoder_f`` in 0.2.0) keeps working for one release."""
    encoder = MLPEncoder(1, 3, hidden=(8,))
    with pytest.warns(DeprecationWarning, match=r"argument 'encoder' was renamed 'encoder_f' in sciml 0\.2\.0"):
        module = KoopmanModule(encoder=encoder, share_encoders=True)
    assert module.encoder_f is encoder and module.encoder_g is encoder
    with pytest.raises(TypeError, match="got both 'encoder' and its new name 'encoder_f'"):
        KoopmanModule(encoder=encoder, encoder_f=encoder)


def test_potential_module_defaults_are_the_recipe(tmp_path, molecule_frames):
    """``PotentialModule(model)`` trains with the benchmark's recipe: AMSGrad at 1e-2 with warm-up + cosine,
    EMA 0.99, force weight 100, and stage two over the last 20 % of the epochs."""
    from sciml.training.schedules import WarmupCosine

    ase.io.write(tmp_path / "frames.extxyz", molecule_frames * 4)
    data = AtomsDataModule(paths=str(tmp_path / "frames.extxyz"), cutoff=3.0, split=(0.6, 0.2, 0.2), batch_size=2)
    module = potential_module(data)
    assert module.weights == {"energy": 1.0, "forces": 100.0, "stress": 0.0} and module.ema is not None
    trainer = L.Trainer(
        max_epochs=5, logger=False, enable_checkpointing=False, enable_progress_bar=False, accelerator="cpu"
    )
    trainer.fit(module, data)
    (optimizer,) = trainer.optimizers
    assert isinstance(optimizer, torch.optim.Adam) and optimizer.defaults["amsgrad"]
    assert optimizer.defaults["lr"] == 1e-2
    (config,) = trainer.lr_scheduler_configs
    assert isinstance(config.scheduler, WarmupCosine) and config.scheduler.total_steps == trainer.global_step
    assert module.weights == {"energy": 1000.0, "forces": 100.0, "stress": 0.0}  # stage two from epoch 4 of 5
    explicit = potential_module(data, optimizer=torch.optim.SGD, stage_two=None, ema_decay=None)
    assert explicit.scheduler_factory is None and explicit.stage_two is None and explicit.ema is None
