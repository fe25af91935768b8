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
device, arch, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
for target in targets:
    python_module, warp_module = target.split("=")
    start = time.perf_counter()
    importlib.import_module(python_module)
    if arch:
        wp.compile_aot_module(warp_module, arch=int(arch))
    else:
        wp.load_module(warp_module, device=device)
    print(f"  {warp_module}: {time.perf_counter() - start:.1f} s", flush=True)
"""


def kernel_modules() -> dict[str, tuple[str, int]]:
    """Every Warp module holding wpsim kernels (a Python module of ``wpsim.kernels``, or a
    module of its own that a large kernel is built in), largest first: Warp module name ->
    (the Python module defining its kernels, that module's source size in bytes). Modules of
    functions alone are compiled into their callers'."""
    import importlib
    import pkgutil

    import warp as wp

    from wpsim import kernels

    found = {}
    for info in pkgutil.iter_modules(kernels.__path__):  # every module, those the package imports lazily too
        module = importlib.import_module(f"{kernels.__name__}.{info.name}")
        size = Path(module.__file__).stat().st_size
        for value in vars(module).values():
            if not isinstance(value, wp.Kernel):
                continue
            warp_name = value.module.name
            if warp_name == module.__name__ or warp_name.startswith(module.__name__ + "."):  # not imported kernels
                found[warp_name] = (module.__name__, size)
    return dict(sorted(found.items(), key=lambda item: -item[1][1]))


def build_kernel_modules(device: str = "cpu", processes: int = 1, arch: int | None = None,
                         verbose: bool = False, names: list[str] | None = None) -> float:
    """Build (or find in Warp's kernel cache) the Warp modules ``names`` of wpsim's kernels
    (default: all of ``kernel_modules``) for ``device``, or for the CUDA architecture
    ``arch`` without a GPU, in ``processes`` processes (largest sources shared out first);
    returns the wall time in s. Raises ``RuntimeError`` naming the modules of a process that
    failed (its compiler errors are on stderr)."""
    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    if arch is not None and arch < 50:
        raise ValueError(f"arch is a CUDA compute capability such as 90 (sm_90), got {arch}")
    modules = kernel_modules()
    if names is not None:
        unknown = sorted(set(names) - set(modules))
        if unknown:
            raise ValueError(f"not wpsim kernel modules: {unknown}; known: {sorted(modules)}")
        modules = {name: found for name, found in modules.items() if name in names}
    shares: list[list[str]] = [[] for _ in range(min(processes, len(modules)))]
    loads = [0] * len(shares)
    for name, (python_module, size) in modules.items():  # largest first, each to the least loaded process
        k = loads.index(min(loads))
        shares[k].append(f"{python_module}={name}")
        loads[k] += size
    start = time.perf_counter()
    output = None if verbose else subprocess.DEVNULL
    jobs = [(share, subprocess.Popen([sys.executable, "-c", _BUILD_SCRIPT, device, str(arch or ""), *share],
                                     stdout=output)) for share in shares]
    try:
        failed = [share for share, job in jobs if job.wait()]
    except BaseException:  # interrupted: the builders stop too (they would compile on, orphaned)
        for _, job in jobs:
            job.terminate()
        for _, job in jobs:
            job.wait()
        raise
    if failed:
        raise RuntimeError(f"building wpsim's kernel modules failed in the processes building {failed}")
    return time.perf_counter() - start
