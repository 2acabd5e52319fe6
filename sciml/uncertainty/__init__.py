"""Uncertainty: one interface for a potential that estimates its own errors, and every part of it in one place.

- :class:`UncertaintyModel` (:mod:`sciml.uncertainty.base`): the interface the calculator, the MD engine, the
  training module and the learning loop depend on; :func:`has_uncertainty` recognises it.
- The estimates behind it: :class:`Committee` (the members' spread) and :class:`LastLayerUncertainty` (the
  last layer's posterior, with :class:`FeatureDensity` for an out-of-distribution force uncertainty).
- :class:`PosteriorSamples`: energy surfaces drawn from either estimate, for MD whose kinetics carry the
  potential's error.
- The scale rule, once (:mod:`sciml.uncertainty.scales`: s^2 = sum e^2 / sum u^2), and the fits that use it
  on a validation split (:mod:`sciml.uncertainty.fitting`).
- How well an uncertainty tracks the errors on labelled frames (:mod:`sciml.uncertainty.report`).
"""

from sciml.uncertainty.base import UncertaintyModel, has_uncertainty
from sciml.uncertainty.committee import Committee
from sciml.uncertainty.feature_density import FeatureDensity
from sciml.uncertainty.fitting import UncertaintyCalibration, calibrate_committee, fit_last_layer_uncertainty
from sciml.uncertainty.last_layer import LastLayerUncertainty
from sciml.uncertainty.posterior_samples import PosteriorSamples
from sciml.uncertainty.report import UncertaintyCalibrationReport, calibration_report
from sciml.uncertainty.scales import scale_factor, scale_from_sums

__all__ = [
    "Committee",
    "FeatureDensity",
    "LastLayerUncertainty",
    "PosteriorSamples",
    "UncertaintyCalibration",
    "UncertaintyCalibrationReport",
    "UncertaintyModel",
    "calibrate_committee",
    "calibration_report",
    "fit_last_layer_uncertainty",
    "has_uncertainty",
    "scale_factor",
    "scale_from_sums",
]
