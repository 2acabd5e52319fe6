"""Property-based: truncated, byte-flipped and NaN/inf-injected extxyz, .traj and .db files either load or
raise DataError naming the file; nothing else escapes (each example bounded by a deadline)."""

from __future__ import annotations

import re
import shutil

import ase.io
import pytest
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sciml.data import AtomsDataModule, DataError

SUFFIXES = (".extxyz", ".traj", ".db")
FUZZ = settings(max_examples=25, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("originals")
    frames = []
    for k in range(3):
        atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
        atoms.rattle(0.05, seed=k)
        atoms.calc = EMT()
        results = {"energy": atoms.get_potential_energy(), "forces": atoms.get_forces()}
        atoms.calc = SinglePointCalculator(atoms, **results)
        frames.append(atoms)
    contents = {}
    for suffix in SUFFIXES:
        path = folder / f"cu{suffix}"
        ase.io.write(path, frames)
        contents[suffix] = path.read_bytes()
    return contents


def load_or_data_error(path) -> None:
    """Read ``path`` through the data module (reading and validation); only DataError naming it may escape."""
    try:
        data = AtomsDataModule(paths=str(path), cutoff=3.0, labels=[], split=(1.0, 0.0, 0.0))
        assert sum(len(r) for r in data.records) >= 0
    except DataError as error:
        assert path.name in str(error), error


def write(tmp_path, suffix: str, content: bytes):
    folder = tmp_path / "case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    path = folder / f"fuzzed{suffix}"
    path.write_bytes(content)
    return path


@FUZZ
@given(suffix=st.sampled_from(SUFFIXES), fraction=st.floats(0.0, 1.0))
def test_truncated_files(tmp_path, originals, suffix, fraction):
    content = originals[suffix]
    load_or_data_error(write(tmp_path, suffix, content[: int(fraction * len(content))]))


@FUZZ
@given(
    suffix=st.sampled_from(SUFFIXES), flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=8)
)
def test_byte_flips(tmp_path, originals, suffix, flips):
    content = bytearray(originals[suffix])
    for where, value in flips:
        content[min(int(where * len(content)), len(content) - 1)] = value
    load_or_data_error(write(tmp_path, suffix, bytes(content)))


@FUZZ
@given(which=st.integers(0, 10_000), token=st.sampled_from(["nan", "inf", "-inf", "NaN", "1e999"]))
def test_non_finite_numbers_in_extxyz(tmp_path, originals, which, token):
    """A non-finite number anywhere either loads (an info value sciml does not use) or is refused; one in an
    atom line (positions, forces) is always refused."""
    text = originals[".extxyz"].decode()
    numbers = list(re.finditer(r"-?\d+\.\d+(e[-+]?\d+)?", text))
    match = numbers[which % len(numbers)]
    path = write(tmp_path, ".extxyz", (text[: match.start()] + token + text[match.end() :]).encode())
    atoms_per_frame = int(text.split("\n", 1)[0])
    in_atom_line = text[: match.start()].count("\n") % (atoms_per_frame + 2) >= 2
    data = AtomsDataModule(paths=str(path), cutoff=3.0, labels=[], split=(1.0, 0.0, 0.0))
    if in_atom_line:
        with pytest.raises(DataError, match=r"fuzzed.extxyz"):
            _ = data.records
    else:
        load_or_data_error(path)
