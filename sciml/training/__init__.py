"""LightningModules: thin, they receive ready-made models, losses and optimizer factories."""

from sciml.training.koopman_fit import fit_koopman
from sciml.training.koopman_module import KoopmanModule
from sciml.training.potential_module import PotentialModule

__all__ = ["KoopmanModule", "PotentialModule", "fit_koopman"]
