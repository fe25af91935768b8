"""wpsim device code: Warp functions and kernels, grouped by physics.

Installed as ``wpsim.kernels``. No orchestration or allocation lives here; the solvers in
``wpsim`` launch these kernels. Every kernel is instantiated for float32 and float64.
"""

from . import (
    articulation,
    cloth,
    contact,
    diagnostics,
    enums,
    fem,
    generic,
    gradients,
    implicit,
    losses,
    particles,
    rigid_contact,
    soft_contact,
    springs,
)

__all__ = [
    "articulation", "cloth", "contact", "diagnostics", "enums", "fem", "generic", "gradients", "implicit", "losses",
    "particles", "rigid_contact", "soft_contact", "springs",
]
