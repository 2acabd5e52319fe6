"""Runs that chain the stages of sciml: from a structure to a potential, its sampling and its kinetics."""

from sciml.pipelines.kinetics import SamplingSettings, sample_replicas, structure_to_kinetics

__all__ = ["SamplingSettings", "sample_replicas", "structure_to_kinetics"]
