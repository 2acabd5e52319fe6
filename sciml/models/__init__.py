"""Models: plain ``nn.Module`` backbones."""

from sciml.models.e2former import E2Former

__all__ = ["E2Former"]
