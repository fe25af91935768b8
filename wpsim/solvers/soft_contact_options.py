"""The settings of the soft-constraint contact solve (``wpsim.solvers.soft_contact``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CHOICES = {"adjoint": ("implicit", "unrolled"), "regularisation": ("mass matrix", "mujoco"),
           "implicit_terms": ("in solve", "after solve"), "friction_mixing": ("mean", "mujoco")}
"""The values each of ``SoftContactOptions``' named settings takes."""
ROUNDING_STEPS = 64.0
"""The smallest tolerance of a solve, in machine epsilons times 1 + impedance / (1 - impedance):
the rows' weights are that factor times their effective masses, so rounding in the cost's
gradient, and in the Newton step, grows with it (float32, impedance 0.99: 7.6e-4; float64:
1.4e-12). Measured on the quadruped standing in float32: the steps after the first
settle between 2e-5 and 8e-5 (in float64 at 3e-13 to 7e-13), the second step 2.6e-4 to 4.9e-4."""


@dataclass
class SoftContactOptions:
    """Settings of the soft-constraint contact solve.

    joint_limits: revolute and prismatic joint limits are soft constraints of the same
        solve (with the joint's own solref and solimp, ``ModelBuilder.set_joint_softness``,
        else this solve's; the model's limit_ke and limit_kd are not used); False keeps them
        as penalty springs.
    joint_friction: a dof with dry friction gets a friction-loss row of this solve (settings
        as the limits'; False: the smooth friction law of the joint-space assembly).
    equalities: joint couplings with a time constant (joint equalities) and point body
        connections (connect equalities) are equality rows of this solve with MuJoCo's law
        and weights (their own solref, with the time constant raised to 2 dt at least, and
        solimp; ``kernels.couplings.soft_row_law``); False keeps them as implicit
        spring-dampers. Welds keep their spring-dampers.
    iterations: Newton iterations at most (all of them with ``fixed_iterations``); each
        step is scaled by an exact line search on the cost, so the cost decreases every
        iteration and the iterates cannot cycle.
    tolerance: stop when every island's largest Newton step (the optimality residual
        Hess^-1 grad f) is below tolerance * (1 + max |a|); at least ``ROUNDING_STEPS``
        machine epsilons of the model's precision times 1 + impedance / (1 - impedance)
        (float32 at impedance 0.99: 7.6e-4), below which rounding keeps the steps from
        shrinking.
    fixed_iterations: run exactly ``iterations`` (for benchmarks; no host read-back, so no
        convergence report, no broad phase, and one island for every set of articulations
        that may touch instead of the islands of each step's contacts).
    raise_on_nonconvergence: raise ``ContactNotConverged`` at a step whose solve stops at
        the cap above the tolerance (otherwise it is counted in ``solver.health()``, and a
        recorded step warns once that its adjoint assumes a converged solve).
    adjoint: "implicit" (backward = one solve at the solution, memory independent of the
        iterations) or "unrolled" (every iteration recorded on the tape).
    warm_start: start each solve from the accelerations the previous step's solve found
        (``State.joint_qdd_warm_start``) instead of the unconstrained ones: in stance, where
        they change little from step to step, one Newton step then usually meets the
        tolerance. The solution does not depend on the start beyond the tolerance; no
        gradient flows through it (the unrolled adjoint treats the start as a constant).
    time_constant (s), damping_ratio: the reference acceleration's spring and damper, as
        MuJoCo's solref: k = 1 / (dmax^2 tc^2 ratio^2), b = 2 / (dmax tc) with dmax =
        ``impedance``. These and the impedance curve below are the settings of every shape
        without its own (``ModelBuilder.set_shape_softness``), which a pair mixes with the
        other shape's as MuJoCo mixes two geoms'; joint limits and dry friction without
        settings of their own use them alone.
    impedance: in (0, 1); closer to 1 makes contacts harder. Soft constraints let a
    sticking contact creep slowly (a 4 kg box on a 0.3 rad incline with mu = 0.5: about
    1.0 mm/s at the defaults, 11 mm/s at impedance 0.9) and sink slightly (0.01 mm).
    impedance_width (m), impedance_min, impedance_midpoint, impedance_power: MuJoCo's solimp
    (dmin, dmax = ``impedance``, width, midpoint, power): a contact's impedance grows from
    impedance_min at the surface to ``impedance`` at a penetration of impedance_width along
    MuJoCo's two-piece power curve; width 0 (default) holds ``impedance`` at every depth.
    With impedance_min 0 the contact force grows from zero at the surface, so the onset of
    contact is continuous in the inputs (a position or velocity that brings the contact
    about). A joint limit's row takes the curve at its violation, a friction-loss row at
    zero violation (dmin where the width is above 0), as MuJoCo's.
    regularisation: how a row's weight D = d / (1 - d) / A estimates its inverse mass A:
        "mass matrix" (wpsim's): a contact's from the mass matrix's diagonal along its four
        cone edges at the step, a dof row's as 1 / H_ii; "mujoco" (MuJoCo's, which the MJCF
        importer asks for): constants at the model's initial pose (``inverse_weights``), a
        contact's 2 mu^2 (1 + mu^2) times its bodies' translational inverse weights, a dof
        row's its dof's. With MuJoCo's, a sphere rests as deep in the floor as in MuJoCo; a
        contact of small mu is much stiffer (as in MuJoCo's pyramidal cone).
    implicit_terms: where the step's implicit terms (joint damping, implicit drive damping:
        dt times them on the joint-space diagonal) act: "in solve" (wpsim's): in the solve's
        matrix, so the constraint forces see the damped dynamics; "after solve" (MuJoCo's,
        which the MJCF importer asks for): the solve uses the matrix without them and one
        more solve with them gives the step's accelerations from the constraint forces
        (``kernels.implicit_terms``). Alike where no row acts on a damped dof.
    impratio: MuJoCo's ratio of frictional to normal impedance: a contact's pyramid edges,
        which carry both, weigh impratio times more (MuJoCo's pyramidal cone: its edges' R is
        2 mu^2 R_normal / impratio), so friction holds tighter and the contact is stiffer.
    friction_mixing: a pair's friction coefficient from its shapes': "mean" (wpsim's) or
        "mujoco" (MuJoCo's, which the MJCF importer asks for: the higher priority's, else the
        larger).
    """

    joint_limits: bool = True
    joint_friction: bool = True
    equalities: bool = True
    iterations: int = 20
    tolerance: float = 1e-10
    fixed_iterations: bool = False
    raise_on_nonconvergence: bool = False
    adjoint: str = "implicit"
    warm_start: bool = True
    time_constant: float = 0.02
    damping_ratio: float = 1.0
    impedance: float = 0.99
    impedance_width: float = 0.0
    impedance_min: float = 0.9
    impedance_midpoint: float = 0.5
    impedance_power: float = 2.0
    regularisation: str = "mass matrix"
    implicit_terms: str = "in solve"
    impratio: float = 1.0
    friction_mixing: str = "mean"


def check_soft_contact_options(options: SoftContactOptions):
    """A ValueError naming the setting where ``options`` holds one out of its range."""
    for name, choices in CHOICES.items():
        if getattr(options, name) not in choices:
            raise ValueError(f"soft contact {name} must be one of {choices}, got {getattr(options, name)!r}")
    if options.iterations < 1 or not options.time_constant > 0 or not 0.0 < options.impedance < 1.0:
        raise ValueError("soft contact needs iterations >= 1, time_constant > 0 s and 0 < impedance < 1")
    if options.impedance_width != 0.0 and not (options.impedance_width > 0.0
                                               and 0.0 <= options.impedance_min <= options.impedance
                                               and 0.0 < options.impedance_midpoint < 1.0
                                               and options.impedance_power >= 1.0):
        raise ValueError("soft contact impedance curve needs impedance_width > 0 m, 0 <= impedance_min <= "
                         "impedance, 0 < impedance_midpoint < 1 and impedance_power >= 1, got "
                         f"{options.impedance_width}, {options.impedance_min}, {options.impedance_midpoint}, "
                         f"{options.impedance_power}")
    if not (np.isfinite(options.impratio) and options.impratio > 0.0):
        raise ValueError(f"soft contact impratio must be > 0, got {options.impratio}")
