"""Models: plain ``nn.Module`` backbones."""

from sciml.models.committee import Committee
from sciml.models.e2former import E2Former
from sciml.models.last_layer import LastLayerUncertainty

__all__ = ["Committee", "E2Former", "LastLayerUncertainty"]
