"""wpsim device code: Warp functions and kernels, grouped by physics.

Installed as ``wpsim.kernels``. No orchestration or allocation lives here; the solvers in
``wpsim`` launch these kernels. Every kernel is instantiated for float32 and float64.

Kernel arguments come in five classes, in this order (``tests/test_kernel_signatures.py``
checks every kernel and launch site):

0. model: arrays named exactly as a Model field (``tet_mu``, ``joint_type``);
1. inputs: arrays named ``*_in``, the state and per-step scratch read (``particle_q_in``:
   the state, never the Model's initial ``particle_q``);
2. control: arrays named exactly as a Control field (``tet_activation``, ``joint_f``);
3. settings: non-array values (``dt``, ``step``, ``friction_smoothing``);
4. outputs: arrays named ``*_out``, everything the kernel writes (also accumulators and
   in-place updates); every output is written, an input never is.

Launch sites pass classes 0-3 as ``inputs=[...]`` and the outputs as ``outputs=[...]``.
"""

from . import (
    articulation,
    articulation_step,
    broad_phase,
    cholesky,
    cloth,
    contact,
    controls,
    couplings,
    diagnostics,
    enums,
    fem,
    generic,
    gradients,
    implicit,
    losses,
    markers,
    particles,
    rigid_contact,
    soft_contact,
    springs,
)

__all__ = [
    "articulation", "articulation_step", "broad_phase", "cholesky", "cloth", "contact", "controls", "couplings", "diagnostics",
    "enums", "fem", "generic", "gradients", "implicit", "losses", "markers", "particles", "rigid_contact",
    "soft_contact", "springs",
]
