"""LightningModules: thin, they receive ready-made models, losses and optimizer factories."""

from sciml.training.koopman_module import KoopmanModule

__all__ = ["KoopmanModule"]
