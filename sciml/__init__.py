"""sciml: equivariant potentials (E2Former) and Koopman singular functions on one data layer."""

__version__ = "0.1.0"
__all__ = ["__version__"]
