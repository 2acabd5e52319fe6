"""``python -m sciml.equivariant.kernels build [--cuda] [--verbose]``: pre-build the compiled kernels.

``python -m sciml.equivariant.kernels nvcc-check OUT.o``: compile the CUDA sources to an object file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sciml.equivariant.kernels.build import compile_cuda_object, load


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sciml.equivariant.kernels", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build and cache the kernels")
    build.add_argument("--cuda", action="store_true", help="also build the CUDA kernels (needs a GPU)")
    build.add_argument("--verbose", action="store_true")
    check = commands.add_parser("nvcc-check", help="compile the CUDA sources to an object file")
    check.add_argument("output", type=Path)
    check.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    if args.command == "build":
        print(f"CPU kernels: {load(with_cuda=False, verbose=args.verbose)}")
        if args.cuda:
            print(f"CUDA kernels: {load(with_cuda=True, verbose=args.verbose)}")
    else:
        print(f"compiled {compile_cuda_object(args.output, args.arch)}")


if __name__ == "__main__":
    main()
