"""Independent reference MD runs (``generate_molecular_md.py`` commands), two at a time on one thread each:
tblite runs on one thread, so two runs fill the 2 cores without oversubscribing them."""

from __future__ import annotations

import os
import subprocess


def run_two_at_a_time(commands: list[list[str]]) -> None:
    """Run ``commands`` (each printed first), two at once with ``OMP_NUM_THREADS=1``; returns when all ended.
    The caller checks what they wrote."""
    running = []
    for command in commands:
        print("+ " + " ".join(command), flush=True)
        running.append(subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": "1"}))
        if len(running) == 2:
            running.pop(0).wait()
    for process in running:
        process.wait()
