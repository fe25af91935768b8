"""Applications: the ``wpsim`` command line, the demo, the gradient audit, the scene library,
the tasks and reports of the planning examples and the command line shared by the examples."""

from wpsim.core.lazy import lazy_submodules

__all__ = ["box_push", "cli", "console", "finger_calibration", "gradient_audit", "plan_report", "run_scene",
           "scene_library", "throw_demo"]
__getattr__, __dir__ = lazy_submodules(__name__, tuple(__all__), globals())
