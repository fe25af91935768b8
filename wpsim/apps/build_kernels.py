"""Build wpsim's kernel modules before the first step: ``wpsim build-kernels``.

Warp compiles a kernel module the first time one of its kernels runs on a device (CPU: clang;
CUDA: NVRTC) and keeps the result in its kernel cache. Building every wpsim module up front, in
several processes, moves that one-off cost (about 150 s on one core for the CPU) out of the
first rollout, and spreads it over the cores. ``arch`` builds CUDA binaries ahead of time for a
GPU architecture (e.g. 90 for Hopper) on a machine without a GPU or CUDA driver (NVRTC ships
inside Warp); copy the kernel cache (``WARP_CACHE_PATH``) to the GPU machine and its first
run finds them there (same Warp version; a driver older than Warp's toolkit, as Warp then
loads binaries, not PTX).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

_BUILD_SCRIPT = """
import importlib, sys, time
import warp as wp
wp.config.log_level = wp.LOG_WARNING
device, arch, names = sys.argv[1], sys.argv[2], sys.argv[3:]
for name in names:
    start = time.perf_counter()
    module = importlib.import_module(name)
    if arch:
        wp.compile_aot_module(module, arch=int(arch))
    else:
        wp.load_module(module, device=device)
    print(f"  {name}: {time.perf_counter() - start:.1f} s", flush=True)
"""


def kernel_module_sizes() -> dict[str, int]:
    """Source size (bytes) of every ``wpsim.kernels`` module that defines Warp kernels, by
    module name, largest first (modules of functions alone are compiled into their callers')."""
    import warp as wp

    import wpsim.kernels as kernels

    def has_kernels(module) -> bool:
        return any(isinstance(v, wp.Kernel) and v.module.name == module.__name__
                   for v in vars(module).values())

    modules = [getattr(kernels, name) for name in kernels.__all__]
    sizes = {m.__name__: Path(m.__file__).stat().st_size for m in modules if has_kernels(m)}
    return dict(sorted(sizes.items(), key=lambda item: -item[1]))


def build_kernel_modules(device: str = "cpu", processes: int = 1, arch: int | None = None,
                         verbose: bool = False, names: list[str] | None = None) -> float:
    """Build (or find in Warp's kernel cache) the wpsim kernel modules ``names`` (default: all of
    ``kernel_module_sizes``) for ``device``, or for the CUDA architecture ``arch`` without a GPU,
    in ``processes`` processes (largest sources shared out first); returns the wall time in s.
    Raises ``RuntimeError`` naming the modules of a process that failed."""
    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    if arch is not None and arch < 50:
        raise ValueError(f"arch is a CUDA compute capability such as 90 (sm_90), got {arch}")
    sizes = kernel_module_sizes()
    if names is not None:
        unknown = sorted(set(names) - set(sizes))
        if unknown:
            raise ValueError(f"not wpsim kernel modules: {unknown}; known: {sorted(sizes)}")
        sizes = {name: size for name, size in sizes.items() if name in names}
    shares: list[list[str]] = [[] for _ in range(min(processes, len(sizes)))]
    loads = [0] * len(shares)
    for name, size in sizes.items():  # largest first, each to the least loaded process
        k = loads.index(min(loads))
        shares[k].append(name)
        loads[k] += size
    start = time.perf_counter()
    output = None if verbose else subprocess.DEVNULL
    jobs = [(share, subprocess.Popen([sys.executable, "-c", _BUILD_SCRIPT, device, str(arch or ""), *share],
                                     stdout=output)) for share in shares]
    failed = [share for share, job in jobs if job.wait()]
    if failed:
        raise RuntimeError(f"building wpsim's kernel modules failed for {failed} (see the output above)")
    return time.perf_counter() - start

