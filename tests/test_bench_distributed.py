"""The ``distributed`` benchmark suite starts its Ray as a pool does: through
``wpsim.distributed.transport.start_ray``, bound to the loopback address (it called
``ray.init`` itself, so its Ray listened on every interface)."""

import pytest

from wpsim.bench import distributed as bench
from wpsim.distributed import transport


class Started(Exception):
    """Raised by the stand-in start: the suite need not run."""


def test_the_suite_starts_a_local_ray_through_start_ray(monkeypatch):
    ray = pytest.importorskip("ray")
    calls = []

    def start(ray_module, address, init_options):
        calls.append((ray_module, address, init_options))
        raise Started

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("the suite called ray.init itself"))
    monkeypatch.setattr(transport, "start_ray", start)
    with pytest.raises(Started):
        bench.distributed_suite(quick=True)
    ((module, address, options),) = calls
    assert module is ray and address == "local" and options["log_to_driver"] is False
    assert "include_dashboard" not in options and "_node_ip_address" not in options  # start_ray's loopback defaults
