"""The torch and e3nn releases sciml supports, checked when ``sciml`` is imported.

The same ranges are the requirements in ``pyproject.toml`` (a test keeps them equal); ``constraints.txt`` is
the exact set CI tests. A pip install respects them; an environment assembled otherwise (``--no-deps``, conda,
a source build of torch) can hold anything, and this check names the range instead of failing deep inside a
kernel build or an ``e3nn`` call.
"""

from __future__ import annotations

from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

SUPPORTED: dict[str, str] = {
    # torch.library.register_fake (the compiled kernels' fake implementations): 2.4
    "torch": ">=2.4",
    # o3.FromS2Grid / ToS2Grid / spherical_harmonics / Irreps as sciml calls them; 0.7 may change them
    "e3nn": ">=0.5,<0.7",
}


class UnsupportedDependency(ImportError):
    """An installed torch or e3nn outside the range sciml supports."""


def release(version: str) -> Version:
    """The public release of ``version`` (``2.13.0+cu126`` -> ``2.13.0``; pre-releases kept)."""
    return Version(Version(version).public)


def check(installed: dict[str, str] | None = None) -> None:
    """Raise :class:`UnsupportedDependency` naming the supported range if torch or e3nn is outside it.

    Args:
        installed: package -> version string; default: what :mod:`importlib.metadata` finds. A package that
            is not installed is left to the import that needs it.
    """
    if installed is None:
        installed = {}
        for name in SUPPORTED:
            try:
                installed[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
    problems = []
    for name, version in installed.items():
        try:
            ok = SpecifierSet(SUPPORTED[name]).contains(release(version), prereleases=True)
        except InvalidVersion:
            continue  # a local build with a non-PEP 440 version: nothing to compare
        if not ok:
            problems.append(f"{name} {version} is installed, but sciml supports {name}{SUPPORTED[name]}")
    if problems:
        raise UnsupportedDependency(
            "; ".join(problems) + ". Install a supported release (e.g. pip install 'torch>=2.4' 'e3nn>=0.5,<0.7'; "
            "the tested set is constraints.txt in the sciml repository)."
        )
