"""Applications: the ``wpsim`` command line, the demos (the soft-finger calibration and the
throw), the gradient audit, the command lines of the contact studies, the reports of the
planning examples and the command line shared by the examples. The tasks they run live in
``wpsim.tasks``."""

from wpsim.core.lazy import lazy_submodules

__all__ = ["cli", "console", "finger_demo", "gradient_audit", "plan_report", "run_scene", "throw_demo"]
__getattr__, __dir__ = lazy_submodules(__name__, tuple(__all__), globals())
