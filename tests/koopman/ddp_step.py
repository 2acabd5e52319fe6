"""One SGD step of a KoopmanModule on 800 fixed OU pairs, on 1 process (batch 800) or under DDP on
``--devices`` CPU processes (800 / devices each); writes the updated parameters to ``--out``.
Used by test_training.py: with global moments the two must agree."""

from __future__ import annotations

import argparse
from functools import partial

import lightning as L
import torch
from torch.utils.data import TensorDataset

from sciml.data.systems import OrnsteinUhlenbeck
from sciml.koopman import LoRALoss, MLPEncoder
from sciml.training import KoopmanModule


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    states = torch.as_tensor(OrnsteinUhlenbeck().simulate(801, seed=0)[0], dtype=torch.float32)
    data = L.LightningDataModule.from_datasets(
        train_dataset=TensorDataset(states[:-1], states[1:]), batch_size=800 // args.devices
    )
    torch.manual_seed(0)
    model = KoopmanModule(MLPEncoder(1, 4, hidden=(32,)), loss=LoRALoss(), optimizer=partial(torch.optim.SGD, lr=0.5))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
        max_steps=1,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, data)
    if trainer.global_rank == 0:
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, args.out)


if __name__ == "__main__":
    main()
