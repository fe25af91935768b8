import os

# The suite runs in two pytest-xdist workers on two cores: each worker (and every example it
# starts in a subprocess, which inherits the environment) runs OpenMP/BLAS on one thread. With
# the default of one thread per core the two workers' thread pools oversubscribe the cores and
# small torch ops cost many times their arithmetic (test_mpc's 1000-epoch imitation fit: 127 s in
# the suite, 11 s on one thread). Set before numpy (through warp) or torch loads.
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import warp as wp  # noqa: E402

# Silence Warp's start-up banner and module-load messages (warnings still show).
wp.config.log_level = wp.LOG_WARNING


def _compile_kernel_modules(processes: int):
    """Build (or find in Warp's kernel cache) every wpsim kernel module for the CPU, the
    modules shared out over ``processes`` processes, largest sources first."""
    import subprocess
    import sys
    from pathlib import Path

    import wpsim.kernels as kernels

    def has_kernels(module) -> bool:
        return any(isinstance(v, (wp.Kernel, wp.Function)) and v.module.name == module.__name__
                   for v in vars(module).values())

    modules = [getattr(kernels, name) for name in kernels.__all__]
    sizes = {m.__name__: Path(m.__file__).stat().st_size for m in modules if has_kernels(m)}
    shares = [[] for _ in range(processes)]
    loads = [0] * processes
    for name in sorted(sizes, key=sizes.get, reverse=True):
        k = loads.index(min(loads))
        shares[k].append(name)
        loads[k] += sizes[name]
    script = ("import sys, importlib, warp as wp; wp.config.log_level = wp.LOG_WARNING; "
              "[wp.load_module(importlib.import_module(n), device='cpu') for n in sys.argv[1:]]")
    jobs = [subprocess.Popen([sys.executable, "-c", script, *share]) for share in shares if share]
    if any(job.wait() for job in jobs):
        raise RuntimeError("compiling wpsim's kernel modules failed (see the output above)")


def pytest_configure(config):
    """With pytest-xdist workers (``-n N``), the controller builds the kernel modules first, in N
    processes: otherwise, with an empty kernel cache, the workers start on the same tests and
    each compiles the same modules at the same time."""
    workers = getattr(config.option, "numprocesses", None)
    if hasattr(config, "workerinput") or not isinstance(workers, int) or workers < 2:
        return
    _compile_kernel_modules(workers)
