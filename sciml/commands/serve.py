"""``sciml serve``: a trained potential as an i-PI client (the i-PI server drives the dynamics).

    i-pi configs/md/ipi_nve.xml &
    sciml serve --checkpoint path/to/last.ckpt --structure data/ethanol_gfn2.extxyz --ipi unix:sciml

``--structure`` gives the elements (and, for periodic systems, ``pbc``) in the order of i-PI's initial
structure; positions and cell come from i-PI at every call. Energies, forces, and for cells periodic in all
directions the stress (virial), go back through ASE's ``SocketClient`` (the i-PI protocol, atomic units on
the wire). ``--ipi unix:NAME`` connects to i-PI's UNIX socket ``/tmp/ipi_NAME``; ``HOST:PORT`` to an
internet socket. The client waits up to ``--wait`` seconds for the server to open it and exits when i-PI
sends EXIT.
"""

from __future__ import annotations

import argparse
import socket
import time

from ase.calculators.socketio import SocketClient

from sciml.commands.potential_options import add_potential_arguments, structure_and_calculator


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sciml serve", description=__doc__.split("\n\n")[0])
    add_potential_arguments(parser, "elements in i-PI's atom order (any file ASE reads)")
    parser.add_argument("--ipi", required=True, help="unix:NAME (socket /tmp/ipi_NAME) or HOST:PORT")
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the server's socket")
    return parser


def connect(address: str, wait: float) -> SocketClient:
    """An ASE ``SocketClient`` connected to ``address`` (``unix:NAME`` or ``HOST:PORT``), retrying until the
    server listens or ``wait`` seconds have passed."""
    if address.startswith("unix:"):
        options = {"unixsocket": address[len("unix:") :]}
    else:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"--ipi must be unix:NAME or HOST:PORT, got '{address}'")
        options = {"host": host, "port": int(port)}
    deadline = time.monotonic() + wait
    while True:
        try:
            return SocketClient(**options)
        except (FileNotFoundError, ConnectionRefusedError, socket.gaierror) as error:
            if time.monotonic() > deadline:
                raise ConnectionError(f"no i-PI server at '{address}' after {wait:.0f} s ({error})") from error
            time.sleep(0.2)


def main(args: list[str]) -> None:
    options = parser().parse_args(args)
    atoms, atoms.calc = structure_and_calculator(options)
    client = connect(options.ipi, options.wait)
    print(f"sciml serve: {len(atoms)} atoms, connected to i-PI at {options.ipi}", flush=True)
    try:
        client.run(atoms, use_stress=bool(atoms.pbc.all()))
    finally:
        client.close()
