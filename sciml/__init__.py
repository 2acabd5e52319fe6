"""sciml: equivariant potentials (E2Former) and Koopman singular functions on one data layer."""

from sciml._dependencies import check as _check_dependencies

__version__ = "0.2.0"
__all__ = ["__version__"]

_check_dependencies()
