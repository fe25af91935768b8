"""Tasks: the problems people optimise and study, shared by the examples, the apps (the
``wpsim`` command line) and the benchmarks: their scenes, costs, success tests and random
starts.

``scene_library`` (standard scenes of the demo, the benchmarks and the tests),
``robot_scene`` (a robot file as a scene, with its start pose), the planning tasks
``box_push`` (a three-link arm pushes a box to a goal pose), ``finger_spin`` (a two-joint
finger turns a spinner), ``panda_push`` (MuJoCo Menagerie's Franka Panda pushes a cube to a
goal pose) and ``quadruped_accelerate`` (Menagerie's Unitree Go1 accelerates to a target
speed), ``finger_calibration`` (a soft finger fitted to measured markers), ``throw`` (a soft
cube thrown onto a target), and the contact studies ``contact_onset`` and
``contact_tosses``. This layer sits above ``opt`` and below ``apps``
and ``bench``: it never imports either, so that both can use it.
"""

from wpsim.core.lazy import lazy_submodules

__all__ = ["box_push", "contact_onset", "contact_tosses", "finger_calibration", "finger_spin", "panda_push",
           "quadruped_accelerate", "robot_scene", "scene_library", "throw"]
__getattr__, __dir__ = lazy_submodules(__name__, tuple(__all__), globals())
