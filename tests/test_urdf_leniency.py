"""URDF numbers pybullet reads although they are malformed (a comma after a number, a trailing
dot, $(optenv), extra numbers) are read as pybullet reads them and listed; too few numbers or one
that is not finite are still refused, naming the file, element and attribute."""

import numpy as np
import pytest
import warp as wp

from wpsim.io.scene_parsing import SceneFileError
from wpsim.io.urdf import import_urdf

ROBOT = """<robot name="r">
  <link name="base"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
  </inertial></link>
  <link name="arm"><inertial><origin xyz="0.07, 0, -0.2"/><mass value="0.5"/>
    <inertia ixx="0.002" iyy="0.002" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin rpy="0 0 0 0"/><geometry><box size="0.1 0.1 0.3"/></geometry></collision></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="$(optenv ARM_XYZ 0.1 0 0.5)"/><axis xyz="0 1 0"/>
    <limit lower="-1.57." upper="1.57" effort="10" velocity="1"/></joint>
</robot>"""


def test_pybullet_leniencies_are_read_as_pybullet_reads_them_and_listed(tmp_path):
    path = tmp_path / "lenient.urdf"
    path.write_text(ROBOT)
    with pytest.warns(UserWarning, match="read as pybullet reads it"):
        builder, scene = import_urdf(path)
    listed = {(u.line, u.element, u.attribute): u.note for u in scene.unhonoured}
    assert '"0.07," as 0.07' in listed[(4, "<origin>", "xyz")]
    assert "the first 3 of its 4 numbers" in listed[(6, "<origin>", "rpy")]
    assert '"$(optenv" as 0, "ARM_XYZ" as 0, the first 3 of its 5 numbers' in listed[(8, "<origin>", "xyz")]
    assert '"-1.57." as -1.57' in listed[(9, "<limit>", "lower")]
    model = builder.finalize(dtype=wp.float64)
    np.testing.assert_allclose(model.joint_limit_lower.numpy(), [-1.57])
    np.testing.assert_allclose(model.joint_X_p.numpy()[1][:3], [0.0, 0.0, 0.1])  # as pybullet: 0, 0, 0.1
    np.testing.assert_allclose(model.body_com.numpy()[-1], [0.07, 0.0, -0.2])


def test_the_leniencies_match_pybullet(tmp_path):
    """pybullet loads the lenient file as the same file written strictly: the same joint limits,
    joint frame and link centre of mass."""
    pybullet = pytest.importorskip("pybullet")
    strict = (ROBOT.replace("0.07, 0, -0.2", "0.07 0 -0.2").replace('rpy="0 0 0 0"', 'rpy="0 0 0"')
              .replace("$(optenv ARM_XYZ 0.1 0 0.5)", "0 0 0.1").replace('"-1.57."', '"-1.57"'))
    client = pybullet.connect(pybullet.DIRECT)
    try:
        seen = []
        for name, text in (("lenient", ROBOT), ("strict", strict)):
            path = tmp_path / f"{name}.urdf"
            path.write_text(text)
            robot = pybullet.loadURDF(str(path), physicsClientId=client)
            info = pybullet.getJointInfo(robot, 0, physicsClientId=client)
            seen.append((info[8], info[9], *info[14], *pybullet.getDynamicsInfo(robot, 0, physicsClientId=client)[3]))
        np.testing.assert_allclose(seen[0], seen[1], rtol=0, atol=1e-12)
    finally:
        pybullet.disconnect(client)


@pytest.mark.parametrize("text", ["1 2", "1,2,3", "inf 0 0"])
def test_what_pybullet_would_refuse_is_refused(tmp_path, text):
    path = tmp_path / "bad.urdf"
    path.write_text(ROBOT.replace("$(optenv ARM_XYZ 0.1 0 0.5)", text))
    with pytest.raises(SceneFileError, match=f'bad.urdf: <origin> xyz="{text}"'):
        import_urdf(path)
