"""A plain MLP with SiLU (optionally LayerNorm) between layers."""

from __future__ import annotations

from torch import Tensor, nn


class MLP(nn.Sequential):
    """sizes = (in, hidden..., out): Linear -> [LayerNorm] -> SiLU between layers, none after the last."""

    def __init__(self, sizes: tuple[int, ...], layer_norm: bool = False, bias_last: bool = True) -> None:
        layers: list[nn.Module] = []
        for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            last = k == len(sizes) - 2
            layers.append(nn.Linear(a, b, bias=bias_last or not last))
            if not last:
                layers += [nn.LayerNorm(b)] if layer_norm else []
                layers.append(nn.SiLU())
        super().__init__(*layers)

    def last_layer_input(self, x: Tensor) -> Tensor:
        """What the last (linear) layer reads: every layer but the last applied to ``x``."""
        for layer in list(self)[:-1]:
            x = layer(x)
        return x
