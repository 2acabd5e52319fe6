"""The one scale rule of every uncertainty in sciml: s^2 = sum e^2 / sum u^2.

With a model's unscaled uncertainties u and its errors e over held-out frames (per structure for energies,
per force component for forces), the calibrated variances s^2 u^2 add up to the observed squared errors
(Musil et al., J. Chem. Theory Comput. 15, 906 (2019), fit one such factor per property). It fits a
committee's and a last-layer model's scales on the validation split during training
(:mod:`sciml.uncertainty.fitting`), and refits them on frames of a model's own MD (``sciml learn``).
"""

from __future__ import annotations

import numpy as np
import torch


def scale_from_sums(error_squares: float, spread_squares: float) -> float:
    """sqrt(sum e^2 / sum u^2) from the two sums (accumulated batch by batch, added across processes); NaN
    when there is no spread to scale."""
    if not spread_squares > 0 or not np.isfinite(spread_squares):
        return float("nan")
    return float(np.sqrt(error_squares / spread_squares))


def scale_factor(errors: torch.Tensor | np.ndarray, spreads: torch.Tensor | np.ndarray) -> float:
    """The scale s with s^2 = sum e^2 / sum u^2 over every element of ``errors``; ``spreads`` broadcast
    against them (per-atom force spreads (N, 1) against force errors (N, 3): each counts for its three
    components)."""
    errors = torch.as_tensor(errors).double()
    spreads = torch.broadcast_to(torch.as_tensor(spreads).double(), errors.shape)
    return scale_from_sums(float(errors.pow(2).sum()), float(spreads.pow(2).sum()))
