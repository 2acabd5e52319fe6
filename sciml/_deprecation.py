"""Renamed keyword arguments keep working for one release, with a :class:`DeprecationWarning`."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def renamed_arguments(renames: dict[str, str], since: str, removed_in: str) -> Callable[[F], F]:
    """Decorate a function so that each old keyword in ``renames`` (old -> new) is passed on as the new one.

    The old name warns (naming both, the release that renamed it and the one that drops it); giving both
    names is a ``TypeError``. The signature stays the new one (``functools.wraps``), so LightningCLI and
    ``help()`` show only the current names.
    """

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(f"{function.__qualname__}() got both '{old}' and its new name '{new}'")
                warnings.warn(
                    f"{function.__qualname__}: argument '{old}' was renamed '{new}' in sciml {since}; "
                    f"'{old}' stops working in {removed_in}",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
