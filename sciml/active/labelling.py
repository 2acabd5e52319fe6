"""``Labeller``: the oracle and the label store of a run, behind one call: label these picks.

Labels are computed one after another in this process, or, given an ``executor`` (any
:class:`concurrent.futures.Executor`: a local ``ProcessPoolExecutor``, a Dask cluster's
``Client.get_executor()``, a Parsl executor), all of a round's picks at once on its workers. The store takes them
in the picks' order, each as soon as it and those before it are back (the same store as labelling one by one);
with the oracle's label cache, a killed run keeps every label that came back. Give a process pool the "spawn"
start method: a forked child of a process whose OpenMP runtime has run (PySCF, torch) can hang;
:func:`~sciml.active.local_pool` makes one whose workers share the cores: on 2 cores a 9-atom PBE/def2-SVP label
takes 4.5 s on one OpenMP and BLAS thread and 5.1 s on two, and two one-thread workers label a frame every
2.7-3.3 s (``data/ethanol_dft/*.provenance.json``).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor

from sciml.active.oracles import Oracle, OracleFailure
from sciml.active.picks import Pick
from sciml.active.state import RunState
from sciml.active.store import LabelStore


class Labeller:
    """Labels picks with ``oracle`` into ``store`` (each once: a key the store holds is skipped), its time on
    the run's oracle clock; a failure is recorded in the store and reported, never raised. ``executor``: where
    the labels are computed (module docstring; ``None``: here, one by one)."""

    def __init__(
        self,
        oracle: Oracle,
        store: LabelStore,
        state: RunState,
        report: Callable[[str], None],
        executor: Executor | None = None,
    ) -> None:
        self.oracle, self.store, self.state, self.report, self.executor = oracle, store, state, report, executor

    def label(self, picks: list[Pick], round: int) -> None:
        """Label the frames of ``picks``, picked in round ``round``, that the store does not hold yet."""
        pending = [pick for pick in picks if pick.key not in self.store.keys]
        if self.executor is None or len(pending) < 2:
            for pick in pending:
                self.label_one(pick, round)
        else:
            self.state.timed("oracle", self._label_on_executor, pending, round)

    def label_one(self, pick: Pick, round: int) -> None:
        """Label ``pick``'s frame with its round."""
        try:
            labelled = self.state.timed("oracle", self.oracle.label, pick.atoms)
        except OracleFailure as failure:
            self._failed(pick, round, failure)
            return
        self.store.add(labelled, pick, round, self.oracle.name)

    def _label_on_executor(self, picks: list[Pick], round: int) -> None:
        futures = [(self.executor.submit(self.oracle.label, pick.atoms), pick) for pick in picks]
        for future, pick in futures:  # stored in the picks' order (a killed run: an oracle's cache keeps the rest)
            try:
                labelled = future.result()
            except OracleFailure as failure:
                self._failed(pick, round, failure)
                continue
            self.store.add(labelled, pick, round, self.oracle.name)

    def _failed(self, pick: Pick, round: int, failure: OracleFailure) -> None:
        self.store.add_failure(pick, round, str(failure))
        self.report(f"round {round}: oracle failed on {pick.key} (recorded in {self.store.failed_path.name}): "
                    f"{failure}")  # fmt: skip

    def labelled_in(self, round: int) -> int:
        """Frames of the store labelled with round number ``round``."""
        return sum(1 for record in self.store.labelled_records if record.round == round)


def local_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool of ``workers`` spawned workers that share this machine's cores: each runs
    ``cores // workers`` (at least one) BLAS, OpenMP and torch threads, so that the workers together never
    oversubscribe the cores."""
    if workers < 1:
        raise ValueError(f"a pool needs at least one worker, got {workers}")
    threads = max(1, (os.cpu_count() or 1) // workers)
    spawn = multiprocessing.get_context("spawn")  # module docstring: never fork a process with OpenMP running
    return ProcessPoolExecutor(workers, mp_context=spawn, initializer=_use_threads, initargs=(threads,))


def _use_threads(threads: int) -> None:
    """A worker's initializer: ``threads`` BLAS, OpenMP and torch threads. A spawned worker has imported its
    parent's main module (numpy, often torch) before this runs, so the runtimes already loaded are limited in
    place (threadpoolctl) and the environment covers those loaded later."""
    from threadpoolctl import threadpool_limits

    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(threads)
    _LIMITS.append(threadpool_limits(threads))  # kept: the limits hold for the worker's life
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


_LIMITS: list = []
