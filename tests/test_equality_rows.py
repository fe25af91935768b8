"""Joint and connect equalities as rows of the soft-constraint solve (``SoftContactOptions.
equalities``): MuJoCo's law and weights, against MuJoCo, and their gradients."""

import numpy as np
import pytest
import warp as wp
from test_soft_contact import assert_adjoints_agree

import wpsim
from wpsim.io.mjcf import import_mjcf
from wpsim.solvers import SoftContactOptions

CHAIN = """<mujoco><option timestep="0.002"/><worldbody>
<body name="a" pos="0 0 1"><joint name="j1" type="hinge" axis="0 1 0"/>
 <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/>
 <body name="b" pos="0.3 0 0"><joint name="j2" type="hinge" axis="0 1 0"/>
  <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/>
  <body name="c" pos="0.3 0 0"><joint name="j3" type="hinge" axis="0 1 0"/>
   <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/></body></body></body>
</worldbody><equality>{equalities}</equality></mujoco>"""
JOINT = '<joint joint1="j2" joint2="j1" polycoef="0.1 0.5 0.3 0 0" solimp="0.8 0.97 0.01 0.4 3" solref="0.03 0.8"/>'
CONNECT = '<connect body1="c" body2="a" anchor="0.3 0 0" solref="0.001 1"/>'
"""A connect whose time constant is below 2 dt (MuJoCo raises it to 2 dt)."""


def rollouts(tmp_path, equalities: str, steps: int, speed: float, rows: bool = True):
    """(wpsim, MuJoCo) joint angles (steps, 3) of the chain with ``equalities``, from a
    perturbed pose at joint speeds up to ``speed`` rad/s, with the file's solve."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "chain.xml"
    path.write_text(CHAIN.format(equalities=equalities))
    mj = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(mj)
    rng = np.random.default_rng(0)
    data.qpos[:] = mj.qpos0 + 0.1 * rng.uniform(-1.0, 1.0, 3)
    data.qvel[:] = speed * rng.uniform(-1.0, 1.0, 3)
    builder, scene = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(**scene.contact_settings,
                                                                             equalities=rows))
    state, spare = model.state(), model.state()
    state.joint_q.assign(data.qpos)
    state.joint_qd.assign(data.qvel)
    ours, theirs = [], []
    for _ in range(steps):
        mujoco.mj_step(mj, data)
        solver.step(state, spare, None, mj.opt.timestep)
        state, spare = spare, state
        ours.append(state.joint_q.numpy().copy())
        theirs.append(data.qpos.copy())
    return np.array(ours), np.array(theirs)


def test_a_joint_equality_moves_as_in_mujoco(tmp_path):
    """A quadratic joint equality with its own solref and solimp (an impedance curve) holds
    the chain as MuJoCo's does: 500 steps agree to 1e-12 rad (measured 1.5e-14); as an
    implicit spring-damper (``equalities=False``) they differ by 1e-3 rad or more."""
    ours, theirs = rollouts(tmp_path, JOINT, 500, 0.5)
    assert np.abs(theirs[-1] - theirs[0]).max() > 0.1
    assert np.abs(ours - theirs).max() < 1e-12
    springs, theirs = rollouts(tmp_path, JOINT, 500, 0.5, rows=False)
    assert np.abs(springs - theirs).max() > 1e-3


def test_a_connect_equality_moves_as_in_mujoco(tmp_path):
    """A violated connect (its time constant raised to 2 dt as MuJoCo's refsafe does), alone
    and with the joint equality, holds the chain as MuJoCo's does over 500 steps, to 1e-12 rad
    (measured 3.1e-14 and 2.7e-15): its reference acceleration less the gap's velocity-product
    acceleration J' qd, as MuJoCo 4 has it (without that term 1.6e-5 rad apart after one step)."""
    for equalities in (CONNECT, JOINT + CONNECT):
        ours, theirs = rollouts(tmp_path, equalities, 500, 0.5)
        assert np.abs(ours - theirs).max() < 1e-12
    assert np.abs(rollouts(tmp_path, CONNECT, 1, 0.5, rows=False)[0] - theirs[:1]).max() > 1e-6


def equality_chain():
    """The chain of ``CHAIN`` with both equalities."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chain.xml"
        path.write_text(CHAIN.format(equalities=JOINT + CONNECT.replace("0.001 1", "0.02 1")))
        builder = import_mjcf(path)[0]
    return builder.finalize(dtype=wp.float64, requires_grad=True)


@pytest.mark.parametrize("regularisation", ["mujoco", "mass matrix"])
def test_equality_row_gradients_match_unrolled_and_central_differences(regularisation):
    assert_adjoints_agree(equality_chain, "joint_qd", regularisation=regularisation)


def test_equalities_are_refused_with_a_bad_impedance():
    builder = wpsim.ModelBuilder()
    body = builder.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
    joint = builder.add_joint_revolute(-1, body, axis=(0.0, 1.0, 0.0))
    with pytest.raises(ValueError, match=r"joint coupling 0: solimp must be"):
        builder.add_joint_coupling([joint], [1.0], time_constant=0.02, impedance=(0.9, 0.95, -1.0, 0.5, 2.0))
    with pytest.raises(ValueError, match=r"body connection 0: solimp must be"):
        builder.add_body_connection(body, (0, 0, 0), -1, (0, 0, 0), impedance=(0.9, 1.5, 0.001, 0.5, 2.0))
