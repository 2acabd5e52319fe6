"""Small frozen settings that E2Former's parts take instead of long positional lists: one place resolves each
value (the edge networks' hidden width, for one), and every part reads it by name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EdgeSettings:
    """The invariant edge inputs and the networks that read them (:mod:`sciml.models.e2former.edges`).

    Args:
        features: width of the edge inputs each consumer reads: the per-edge radial basis and atom-type
            embeddings (3 x radial basis), or the shared trunk's output.
        hidden: hidden width of the per-layer radial-filter and logit MLPs (and of the shared trunk).
        shared: the inputs are the shared trunk's features, and the consumers are single linear maps of them.
    """

    features: int
    hidden: int
    shared: bool = False


@dataclass(frozen=True)
class BlockSettings:
    """One transformer block (:class:`~sciml.models.e2former.blocks.TransformerBlock`) and its attention
    (:class:`~sciml.models.e2former.attention.Wigner6jAttention`).

    Args:
        lmax: feature degrees 0..lmax. channels: C. heads: attention heads (C divisible by heads).
        order: attention order L (0, 1 or 2) or ``"all"``. edges: the edge inputs and networks.
        hidden: feed-forward width. feed_forward: ``"gate"`` or ``"s2"`` (on a grid of ``s2_resolution``
            latitudes). norm: the kind of :class:`~sciml.nn.so3_layers.EquivariantRMSNorm`.
        head_dim: query/key size per head. dense / backend / parity: see
            :class:`~sciml.models.e2former.convolution.Wigner6jConvolution`.
    """

    lmax: int
    channels: int
    heads: int
    order: int | str
    edges: EdgeSettings
    hidden: int | None = None
    feed_forward: str = "gate"
    s2_resolution: int = 18
    norm: str = "centred"
    head_dim: int = 16
    dense: bool = False
    backend: str = "auto"
    parity: bool = True

    @property
    def feed_forward_width(self) -> int:
        """The feed-forward width (default 2 C)."""
        return self.hidden or 2 * self.channels
