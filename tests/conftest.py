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


def pytest_configure(config):
    """With pytest-xdist workers (``-n N``), the controller builds the kernel modules first, in N
    processes: otherwise, with an empty kernel cache, the workers start on the same tests and
    each compiles the same modules at the same time."""
    workers = getattr(config.option, "numprocesses", None)
    if hasattr(config, "workerinput") or not isinstance(workers, int) or workers < 2:
        return
    from wpsim.apps.build_kernels import build_kernel_modules

    build_kernel_modules("cpu", workers)
