"""Build and load the compiled kernels with ``torch.utils.cpp_extension`` (JIT, cached on disk).

The cache key covers the sources, flags, torch version, CPU model and CUDA version, so a stale build is
never loaded. Cache folder: ``$SCIML_KERNEL_CACHE`` or ``~/.cache/sciml/kernels``. Nothing here runs at
import time; ``python -m sciml.equivariant.kernels build`` pre-builds.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import sysconfig
from functools import cache
from pathlib import Path

import torch

from sciml.equivariant.kernels import ops

SOURCES = Path(__file__).parent / "csrc"
#: The CPU library, with the operators' schemas and C++ autograd (ops.cpp) and their CPU kernels.
CPU_SOURCES = [SOURCES / "ops.cpp", SOURCES / "cpu_ops.cpp"]
#: The CUDA library (CUDA kernels only), loaded after the CPU one.
CUDA_SOURCES = [SOURCES / "cuda_ops.cu"]
CFLAGS = ["-O3", "-fopenmp", "-march=native"]
CUDA_CFLAGS = ["-O3", "--expt-relaxed-constexpr"]


class KernelUnavailable(RuntimeError):
    """The compiled kernels cannot be built or loaded here; the message says why."""


def cache_root() -> Path:
    return Path(os.environ.get("SCIML_KERNEL_CACHE", Path.home() / ".cache" / "sciml" / "kernels"))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def build_key(with_cuda: bool) -> str:
    """Hash of the sources, flags, torch version, CPU model and Python of the CPU (or CUDA) library."""
    digest = hashlib.sha256()
    for path in CUDA_SOURCES if with_cuda else CPU_SOURCES:
        digest.update(path.read_bytes())
    flags = [*CUDA_CFLAGS, str(torch.version.cuda)] if with_cuda else CFLAGS
    digest.update(" ".join([*flags, torch.__version__, _cpu_model(), sys.version]).encode())
    return digest.hexdigest()[:16]


def cuda_buildable() -> bool:
    return torch.cuda.is_available() and torch.version.cuda is not None


def library_paths(with_cuda: bool = False) -> list[Path]:
    """Where the shared libraries of the kernels are (or will be) cached: the CPU library, then the CUDA one."""
    paths = []
    for cuda in (False, True) if with_cuda else (False,):
        name = f"sciml_kernels_{'cuda' if cuda else 'cpu'}_{build_key(cuda)}"
        paths.append(cache_root() / name / f"{name}.so")
    return paths


def cuda_library_loaded() -> bool:
    """Whether this process has loaded the CUDA library of the kernels."""
    return str(library_paths(with_cuda=True)[-1]) in torch.ops.loaded_libraries


@cache
def load_library(with_cuda: bool = False, verbose: bool = False) -> tuple[Path, ...]:
    """Build (once, cached on disk) and load the shared libraries; returns their paths (CPU first).

    The CPU library defines the ``sciml::`` schemas and autograd and must be loaded first; the CUDA library
    adds CUDA kernels. Python's fake implementations are not registered here (see :func:`load`).

    Raises:
        KernelUnavailable: with the compiler's or loader's reason.
    """
    if with_cuda and not cuda_buildable():
        raise KernelUnavailable("CUDA kernels need a CUDA build of torch and a visible GPU")
    if with_cuda:
        load_library(False, verbose)
    library = library_paths(with_cuda)[-1]
    try:
        if not library.exists():
            library.parent.mkdir(parents=True, exist_ok=True)
            from torch.utils import cpp_extension

            cpp_extension.load(
                name=library.stem,
                sources=[str(p) for p in (CUDA_SOURCES if with_cuda else CPU_SOURCES)],
                extra_cflags=CFLAGS,
                extra_cuda_cflags=CUDA_CFLAGS,
                extra_ldflags=["-fopenmp"],
                build_directory=str(library.parent),
                is_python_module=False,
                verbose=verbose,
            )
        else:
            torch.ops.load_library(str(library))
    except Exception as error:  # compiler missing, headers missing, linker errors, ...
        raise KernelUnavailable(f"building the {'CUDA' if with_cuda else 'CPU'} kernels failed: {error}") from error
    return tuple(library_paths(with_cuda))


def load(with_cuda: bool = False, verbose: bool = False) -> tuple[Path, ...]:
    """Load the kernels (building them once) with everything Python adds: the fake implementations.

    Returns the shared libraries' paths (CPU first). Raises:
        KernelUnavailable: with the compiler's or loader's reason.
    """
    paths = load_library(with_cuda, verbose)
    ops.register_fakes()
    return paths


def compile_cuda_object(output: Path, arch: str = "sm_90") -> Path:
    """Compile ``cuda_ops.cu`` to an object file with nvcc against torch's headers (no GPU or CUDA torch
    needed). CI runs this so that a broken CUDA kernel fails even on machines without a GPU.
    """
    from torch.utils.cpp_extension import include_paths

    output.parent.mkdir(parents=True, exist_ok=True)
    shim = _cuda_macros_shim(output.parent / "sciml_nvcc_shim")
    nvcc = os.environ.get("NVCC", "nvcc")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    command = [
        nvcc,
        "-c",
        str(CUDA_SOURCES[0]),
        "-o",
        str(output),
        "-std=c++20",
        f"-arch={arch}",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        "-DTORCH_EXTENSION_NAME=sciml_kernels_check",
        "--expt-relaxed-constexpr",
        "-Xcompiler",
        "-fPIC",
        "-O2",
        *[f"-I{p}" for p in include_paths()],
        f"-I{sysconfig.get_paths()['include']}",
        f"-I{shim}",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise KernelUnavailable(f"nvcc failed ({' '.join(command)}):\n{result.stderr[-4000:]}")
    return output


def _cuda_macros_shim(folder: Path) -> Path:
    """CPU wheels of torch ship c10/cuda headers but not the header CMake generates for CUDA builds;
    give nvcc that one file (same content as in CUDA builds) when torch's own is missing."""
    from torch.utils.cpp_extension import include_paths

    relative = Path("c10/cuda/impl/cuda_cmake_macros.h")
    if not any((Path(p) / relative).exists() for p in include_paths()):
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return folder
