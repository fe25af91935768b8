"""The size limit of the articulations a solver steps: the joint-space mass matrix of an
articulation is dense and factored by one thread, so its memory grows as the square and its
work per step as the cube of the dofs; a model beyond the limit is refused when the solver
is built, with the reason, instead of stepping for minutes."""

from __future__ import annotations

import numpy as np
import warp as wp

from wpsim.core.limits import format_bytes, require_memory

MAX_ARTICULATION_DOFS = 2048
"""The most dofs of one articulation that a solver steps. Its joint-space mass matrix is dense
(n^2 entries per world, twice with its Cholesky factor) and factored by one thread (about n^3/6
multiply-adds a step): a 1,000-dof chain takes about 0.3 s a step on one CPU core, 2,048 dofs
about 3 s, a 10,000-link chain about 5 minutes. Raise it to step a larger one anyway."""


def check_articulation_sizes(model):
    """Refuse (``ValueError``) an articulation of more than ``MAX_ARTICULATION_DOFS`` dofs, and
    dense joint-space matrices beyond the memory budget (``wpsim.core.limits``), naming the
    articulation, its dofs, the bytes and the work of a step."""
    dofs = np.diff(model.articulation_dof_start.numpy())
    if not len(dofs):
        return
    largest = int(np.argmax(dofs))
    n, itemsize = int(dofs[largest]), wp.types.type_size_in_bytes(model.dtype)
    root = int(model.joint_child.numpy()[model.dfs_joint.numpy()[model.articulation_start.numpy()[largest]]])
    what = f"articulation {largest} (root body {root}) has {n:,} dofs"
    remedy = ("split it into shorter articulations (e.g. weld or free some links), or raise "
              "wpsim.solvers.articulation_size.MAX_ARTICULATION_DOFS to accept the cost")
    if n > MAX_ARTICULATION_DOFS:
        raise ValueError(f"{what}, more than the {MAX_ARTICULATION_DOFS:,} a solver steps (MAX_ARTICULATION_DOFS): "
                         f"its dense mass matrix takes {format_bytes(2 * n * n * itemsize)} per world with its factor "
                         f"and a step about {n**3 / 6:.2g} multiply-adds in one thread (cubic in the dofs); {remedy}")
    require_memory(f"the dense joint-space mass matrices and factors of {model.articulation_count:,} articulations "
                   f"(the largest: {what})", 2 * model.articulation_H_size * itemsize,
                   "fewer worlds per model, or shorter articulations")

