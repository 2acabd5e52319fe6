"""Model-agnostic layers: radial bases, envelopes, MLPs, SO(3) layers, scatter helpers, force/stress wrapper."""

from sciml.nn.compilation import compile_for_inference
from sciml.nn.forces import ForceStressOutput
from sciml.nn.mlp import MLP
from sciml.nn.radial import GaussianBasis, polynomial_envelope

__all__ = ["MLP", "ForceStressOutput", "compile_for_inference", "GaussianBasis", "polynomial_envelope"]
