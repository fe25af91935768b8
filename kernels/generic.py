"""Precision-generic kernel helpers.

Every wpsim kernel is written once against ``wp.Float`` (and vector/matrix types built on
it) and instantiated for float32 and float64 when its module is imported, so one module
compiles both precisions in a single build and the module hash does not depend on which
precision a program launches first.

Inside kernels, literals must carry the precision of the data: write ``type(x)(0.5)``
where ``x`` is a scalar of the kernel's precision.
"""

import re

import warp as wp

Real = wp.Float
"""Generic floating-point scalar (float32 or float64)."""

vec3 = wp.types.vector(3, wp.Float)
mat22 = wp.types.matrix((2, 2), wp.Float)
mat32 = wp.types.matrix((3, 2), wp.Float)
mat33 = wp.types.matrix((3, 3), wp.Float)
quat = wp.types.quaternion(wp.Float)
transform = wp.types.transformation(wp.Float)

PRECISIONS = (wp.float32, wp.float64)
"""Scalar types every kernel is instantiated for."""


def concretize(annotation, real):
    """Replace ``wp.Float`` in a kernel argument annotation by the scalar type ``real``."""
    if annotation is wp.Float:
        return real
    if wp.types.is_array(annotation):
        return wp.array(dtype=concretize(annotation.dtype, real), ndim=annotation.ndim)
    params = getattr(annotation, "_wp_type_params_", None)
    if params is None or params[-1] is not wp.Float:
        return annotation
    kind = annotation._wp_generic_type_str_
    if kind == "vec_t":
        return wp.types.vector(annotation._length_, real)
    if kind == "mat_t":
        return wp.types.matrix(annotation._shape_, real)
    if kind == "quat_t":
        return wp.types.quaternion(real)
    if kind == "transform_t":
        return wp.types.transformation(real)
    raise TypeError(f"cannot instantiate generic type {annotation} for {real}")


def uncapped_cpu_flags(flags: str | None) -> str | None:
    """Warp's CPU compiler ``flags`` without their cap on the recursion depth of LLVM's SLP
    (straight-line) vectorizer, or None where they set no cap. With LLVM's own depth the
    results are bitwise the same and the element kernels faster: on a 2-core x86 CPU with AVX2,
    ``wpsim bench --suite forward`` stepped the cloth at 3,430-3,440 steps/s against
    2,870-2,960 with the cap (alternating runs), and the soft block's tape forward sped up more
    than its backward, so its backward/forward ratio rose from 2.7 to 2.85-3.08."""
    if not flags:
        return None
    uncapped = re.sub(r"-mllvm[= ]-slp-recursion-max-depth=\d+", "", flags)
    return " ".join(uncapped.split()) if uncapped != flags else None


CPU_FLAGS = uncapped_cpu_flags(wp.config.cpu_compiler_flags)
"""The ``cpu_compiler_flags`` option of wpsim's kernel modules (None: Warp's global flags), from
the global flags when wpsim is imported."""


def kernel(func=None, *, enable_backward=True, module: str | None = None):
    """Decorator: a ``wp.kernel`` instantiated for every scalar type in ``PRECISIONS``.

    The concrete instances are kept in ``kernel.precision_overloads``; launching one of
    them (see ``for_precision``) skips Warp's per-launch argument type inference, which
    costs several times the launch itself on the CPU. ``module``: the Warp module (one
    compiler run) the kernel is built in, by default its Python module's; a kernel whose
    generated code is large gets a module of its own, so that it is compiled beside the
    others (in parallel) and only by programs that launch it. The module is compiled for the
    CPU with ``CPU_FLAGS``.
    """

    def build(f):
        warp_module = wp.get_module(f.__module__ if module is None else module)
        if CPU_FLAGS is not None:
            wp.set_module_options({"cpu_compiler_flags": CPU_FLAGS}, module=warp_module.name)
        k = wp.kernel(f, enable_backward=enable_backward, module=warp_module)
        k.precision_overloads = {
            real: wp.overload(k, [concretize(arg.type, real) for arg in k.adj.args]) for real in PRECISIONS
        }
        return k

    return build(func) if func is not None else build


def for_precision(generic_kernel, real):
    """The concrete instance of a wpsim kernel for scalar type ``real``."""
    return generic_kernel.precision_overloads[real]


def set_deterministic(module_name: str):
    """Ask Warp for run-to-run bitwise reproducible atomics in a kernel module (CUDA only)."""
    wp.set_module_options({"deterministic": wp.DeterministicMode.RUN_TO_RUN}, module=module_name)
