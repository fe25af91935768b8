"""Soft-constraint contact settings per shape (MuJoCo's geom solref, solimp, solmix and
priority): the pair rule, the direct form, MJCF files, MuJoCo's resting depths, gradients."""

import numpy as np
import pytest
import warp as wp
from test_soft_contact import PUSH, assert_adjoints_agree

import wpsim
from wpsim.io.mjcf import import_mjcf
from wpsim.solvers import SoftContactOptions

SPHERE_SOFTNESS = dict(solref=(0.015, 0.8), solimp=(0.7, 0.92, 0.004, 0.3, 3.0), solmix=3.0)
GROUND_SOFTNESS = dict(solref=(0.03, 1.3), solimp=(0.8, 0.97, 0.002, 0.6, 2.0), solmix=1.0)


def sphere_on_ground(sphere=None, ground=None, mu: float = 0.5):
    """A 0.1 m, 500 kg/m^3 sphere (free joint) dropped from 2 mm onto the ground with 0.3 m/s
    sideways, the shapes' own softness set where given (``set_shape_softness`` keywords)."""
    builder = wpsim.ModelBuilder()
    plane = builder.add_ground_plane(mu=mu)
    body = builder.add_body()
    ball = builder.add_shape_sphere(body, radius=0.1, density=500.0, mu=mu)
    builder.add_joint_free(body, pos=(0.0, 0.0, 0.102), lin_vel=(0.3, 0.0, 0.0))
    for shape, settings in ((ball, sphere), (plane, ground)):
        if settings is not None:
            builder.set_shape_softness(shape, **settings)
    return builder.finalize(dtype=wp.float64, requires_grad=True)


def final_state(model, steps: int = 300, **options) -> np.ndarray:
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(**options))
    final = wpsim.simulate(solver, model.state(), steps, 1e-3)
    assert solver.health().ok
    return np.concatenate([final.joint_q.numpy(), final.joint_qd.numpy()])


def as_options(solref, solimp) -> dict:
    """``SoftContactOptions`` keywords of a (standard-form) solref and a solimp."""
    (time_constant, damping_ratio), (dmin, dmax, width, midpoint, power) = solref, solimp
    return dict(time_constant=time_constant, damping_ratio=damping_ratio, impedance=dmax, impedance_min=dmin,
                impedance_width=width, impedance_midpoint=midpoint, impedance_power=power)


def test_equal_priorities_mix_by_solmix_as_mujoco():
    """Sphere solmix 3, ground 1: the pair is 3/4 the sphere's and 1/4 the ground's, solref and
    solimp alike; the run equals one with those settings as the solve's own."""
    mix = 0.75
    solref = mix * np.array(SPHERE_SOFTNESS["solref"]) + (1 - mix) * np.array(GROUND_SOFTNESS["solref"])
    solimp = mix * np.array(SPHERE_SOFTNESS["solimp"]) + (1 - mix) * np.array(GROUND_SOFTNESS["solimp"])
    mixed = final_state(sphere_on_ground(SPHERE_SOFTNESS, GROUND_SOFTNESS))
    expected = final_state(sphere_on_ground(), **as_options(solref, solimp))
    np.testing.assert_allclose(mixed, expected, rtol=0, atol=1e-10)
    unmixed = final_state(sphere_on_ground(), **as_options(SPHERE_SOFTNESS["solref"], SPHERE_SOFTNESS["solimp"]))
    assert np.abs(unmixed - expected).max() > 1e-5  # the mix matters


def test_a_shape_without_settings_mixes_the_solves_own():
    options = dict(time_constant=0.025, damping_ratio=0.9, impedance=0.95, impedance_min=0.85,
                   impedance_width=0.003, impedance_midpoint=0.5, impedance_power=2.0)
    ground = (np.array([0.025, 0.9]), np.array([0.85, 0.95, 0.003, 0.5, 2.0]))
    mixed = final_state(sphere_on_ground(SPHERE_SOFTNESS), **options)
    solref = 0.75 * np.array(SPHERE_SOFTNESS["solref"]) + 0.25 * ground[0]
    solimp = 0.75 * np.array(SPHERE_SOFTNESS["solimp"]) + 0.25 * ground[1]
    np.testing.assert_allclose(mixed, final_state(sphere_on_ground(), **as_options(solref, solimp)), atol=1e-10)


@pytest.mark.parametrize("winner", ["sphere", "ground"])
def test_the_higher_priority_shape_sets_the_pair_alone(winner):
    sphere = dict(SPHERE_SOFTNESS, priority=2 if winner == "sphere" else 0)
    ground = dict(GROUND_SOFTNESS, priority=1)
    alone = SPHERE_SOFTNESS if winner == "sphere" else GROUND_SOFTNESS
    np.testing.assert_allclose(final_state(sphere_on_ground(sphere, ground)),
                               final_state(sphere_on_ground(), **as_options(alone["solref"], alone["solimp"])),
                               rtol=0, atol=1e-10)


def test_the_direct_form_gives_stiffness_and_damping_as_mujoco():
    """solref (-k, -b) means k = k_given / dmax^2 and b = b_given / dmax; (tc, ratio) means
    k = 1 / (dmax tc ratio)^2, b = 2 / (dmax tc): so (-1 / (tc ratio)^2, -2 / tc) is (tc, ratio).
    Two direct forms mix by their entries' minimum."""
    time_constant, ratio, solimp = 0.02, 0.7, (0.9, 0.95, 0.001, 0.5, 2.0)
    direct = (-1.0 / (time_constant * ratio) ** 2, -2.0 / time_constant)
    expected = final_state(sphere_on_ground(), **as_options((time_constant, ratio), solimp))
    both = final_state(sphere_on_ground(dict(solref=direct, solimp=solimp), dict(solref=direct, solimp=solimp)))
    np.testing.assert_allclose(both, expected, rtol=0, atol=1e-10)
    softer = (direct[0] / 4.0, direct[1] / 3.0)
    mixed = final_state(sphere_on_ground(dict(solref=direct, solimp=solimp, solmix=100.0),
                                         dict(solref=softer, solimp=solimp)))
    np.testing.assert_allclose(mixed, expected, rtol=0, atol=1e-10)  # min(-k, -k/4) = -k: the stiffer


@pytest.mark.parametrize("settings, message", [
    (dict(solref=(0.02, -1.0)), "solref must be"),
    (dict(solref=(0.0, 0.0)), "solref must be"),
    (dict(solref=(np.nan, 1.0)), "solref must be"),
    (dict(solimp=(0.9, 1.0, 0.001, 0.5, 2.0)), "solimp must be"),
    (dict(solimp=(0.9, 0.95, -0.001, 0.5, 2.0)), "solimp must be"),
    (dict(solimp=(0.9, 0.95, 0.001, 0.5, 0.5)), "solimp must be"),
    (dict(solmix=-1.0), "solmix must be"),
    (dict(priority=0.5), "priority must be"),
])
def test_bad_settings_are_refused_naming_the_shape(settings, message):
    builder = wpsim.ModelBuilder()
    builder.add_ground_plane()
    with pytest.raises(ValueError, match=f"shape 0: {message}"):
        builder.set_shape_softness(0, **settings)
    with pytest.raises(ValueError, match="shape 3 does not exist"):
        builder.set_shape_softness(3)


RESTING = """<mujoco><option timestep="0.002" cone="pyramidal"/><worldbody>
<geom name="floor" type="plane" size="1 1 0.1" friction="0.8" {floor}/>
<body pos="0 0 0.1"><freejoint/><geom name="ball" type="sphere" size="0.1" density="1000" friction="0.8" {ball}/>
</body></worldbody></mujoco>"""

SETTINGS = [  # widths far below the depths: each contact's impedance is its dmax
    ('solref="0.02 1" solimp="0.9 0.95 1e-6"', 'solimp="0.9 0.95 1e-6"'),
    ('solref="0.01 1" solimp="0.8 0.9 2e-6 0.5 2" solmix="3"', 'solref="0.04 0.7" solimp="0.95 0.99 1e-6"'),
    ('solref="0.03 0.6" solimp="0.6 0.95 4e-6 0.3 3" priority="1"', 'solref="0.01 1.5" solimp="0.9 0.99 1e-6"'),
    ('solref="-4000 -60" solimp="0.9 0.95 1e-6"', 'solref="-2500 -90" solimp="0.85 0.95 2e-6"'),
]


def resting_depths(tmp_path, floor: str, ball: str, **options) -> tuple:
    """(wpsim's, MuJoCo's) depth (m) of the sphere in the floor after 1.5 s at rest; ``options``
    override the file's ``SoftContactOptions`` keywords."""
    mujoco = pytest.importorskip("mujoco")
    text = RESTING.format(floor=floor, ball=ball)
    path = tmp_path / "resting.xml"
    path.write_text(text)
    builder, scene = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64)
    solver = wpsim.SemiImplicitSolver(model, soft_contact=SoftContactOptions(**{**scene.contact_settings,
                                                                                **options}))
    final = wpsim.simulate(solver, model.state(), 750, 0.002)
    assert solver.health().ok
    mj = mujoco.MjModel.from_xml_string(text)
    data = mujoco.MjData(mj)
    mujoco.mj_step(mj, data, 750)
    return 0.1 - float(final.joint_q.numpy()[2]), 0.1 - float(data.qpos[2])


def test_resting_depths_change_with_the_files_softness_as_in_mujoco(tmp_path):
    """A sphere resting on a floor, the geoms' solref / solimp / solmix / priority varied, its
    rows weighed from the mass matrix (wpsim's regularisation, not MuJoCo's): its depth
    relative to the first setting's is MuJoCo's to 0.1 % (measured 2e-5). At rest the depth
    is g (1 - d) A / (k d^2) per unit weight, A the rows' effective inverse mass, which the two
    regularisations estimate differently: the ratios cancel it (tests/test_contact_weights.py
    compares the depths themselves under MuJoCo's)."""
    depths = np.array([resting_depths(tmp_path, floor, ball, regularisation="mass matrix")
                       for ball, floor in SETTINGS])
    assert (depths > 1e-5).all()
    ratios = depths / depths[0]
    assert np.ptp(ratios[:, 1]) > 0.3  # the settings matter
    np.testing.assert_allclose(ratios[:, 0], ratios[:, 1], rtol=1e-3)


def test_an_mjcf_geoms_softness_lands_on_its_shape(tmp_path):
    path = tmp_path / "resting.xml"
    path.write_text(RESTING.format(floor='solref="0.04 0.7" solmix="2" priority="3"',
                                   ball='solref="0.01 1" solimp="0.8 0.9 0.002 0.5 2"'))
    builder, scene = import_mjcf(path)
    model = builder.finalize(dtype=wp.float64)
    assert scene.contact_settings["regularisation"] == "mujoco"
    assert not [u for u in scene.unhonoured if u.attribute in ("solref", "solimp")]
    solve = scene.contact_settings
    solves_own = ([solve["time_constant"], solve["damping_ratio"]],
                  [solve[k] for k in ("impedance_min", "impedance", "impedance_width", "impedance_midpoint",
                                      "impedance_power")])
    solref, solimp = model.shape_solref.numpy(), model.shape_solimp.numpy()
    floor, ball = 0, 1
    expected = {floor: ((0.04, 0.7), (0.9, 0.95, 0.001, 0.5, 2.0)), ball: ((0.01, 1.0), (0.8, 0.9, 0.002, 0.5, 2.0))}
    for shape, (ref, imp) in expected.items():  # a shape without its own takes the solve's
        effective = (solref[shape], solimp[shape]) if solref[shape].any() else solves_own
        np.testing.assert_allclose(effective[0], ref)
        np.testing.assert_allclose(effective[1], imp)
    assert solref[floor].any()  # its solmix and priority are its own
    assert model.shape_priority.numpy()[floor] == 3 and model.shape_solmix.numpy()[floor] == 2.0


def sliding_sphere():
    """A sphere sliding on the ground in contact, both with their own softness."""
    builder = wpsim.ModelBuilder()
    plane = builder.add_ground_plane(mu=0.2)
    body = builder.add_body()
    ball = builder.add_shape_sphere(body, radius=0.1, density=500.0, mu=0.2)
    builder.add_joint_free(body, pos=(0.0, 0.0, 0.0996), lin_vel=(0.4, 0.1, -0.02))
    builder.set_shape_softness(ball, **SPHERE_SOFTNESS)
    builder.set_shape_softness(plane, **GROUND_SOFTNESS)
    return builder.finalize(dtype=wp.float64, requires_grad=True)


@pytest.mark.parametrize("param", ["shape_solref", "shape_solimp", "shape_solmix"])
def test_softness_gradients_match_unrolled_and_central_differences(param):
    assert_adjoints_agree(sliding_sphere, param, wrench=PUSH)
