"""``Labeller``: the oracle and the label store of a run, behind one call: label these frames."""

from __future__ import annotations

from collections.abc import Callable

from ase import Atoms

from sciml.active.oracles import Oracle, OracleFailure
from sciml.active.state import RunState
from sciml.active.store import LabelStore


class Labeller:
    """Labels frames with ``oracle`` into ``store`` (each once: a key the store holds is skipped), its time on
    the run's oracle clock; a failure is recorded in the store and reported, never raised."""

    def __init__(self, oracle: Oracle, store: LabelStore, state: RunState, report: Callable[[str], None]) -> None:
        self.oracle, self.store, self.state, self.report = oracle, store, state, report

    def label(self, candidates: list[tuple[str, Atoms]], round: int) -> None:
        """Label ``(key, frame)`` pairs picked in round ``round`` (their ``info``: ``uncertainty``, ``reason``)."""
        for key, frame in candidates:
            if key not in self.store.keys:
                self.label_one(frame, key, round, float(frame.info["uncertainty"]), frame.info["reason"])

    def label_one(self, atoms: Atoms, key: str, round: int, uncertainty: float, reason: str) -> None:
        """Label one frame under ``key`` with its round, uncertainty (eV/Å) and reason."""
        try:
            labelled = self.state.timed("oracle", self.oracle.label, atoms)
        except OracleFailure as failure:
            self.store.add_failure(atoms, key, round, uncertainty, reason, str(failure))
            self.report(f"round {round}: oracle failed on {key} (recorded in {self.store.failed_path.name}): {failure}")
            return
        self.store.add(labelled, key, round, uncertainty, reason, self.oracle.name)

    def labelled_in(self, round: int) -> int:
        """Frames of the store labelled with round number ``round``."""
        return sum(1 for frame in self.store.labelled if int(frame.info["round"]) == round)
