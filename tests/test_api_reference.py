"""The API reference builds from the docstrings and has a page for every module."""

import pytest

pytest.importorskip("pdoc")

from wpsim.apps.api_reference import build, module_names  # noqa: E402


def test_every_module_has_a_page_with_its_public_names(tmp_path):
    index = build(tmp_path)
    assert index.is_file()
    names = module_names()
    assert {"wpsim.opt.torch", "wpsim.core.builder", "wpsim.io.usd_export", "wpsim.kernels.fem"} <= set(names)
    missing = [n for n in names if not (tmp_path / (n.replace(".", "/") + ".html")).is_file()]
    assert not missing
    page = (tmp_path / "wpsim/opt/torch.html").read_text()
    assert "TorchStep" in page and "TorchRollout" in page and "initial_state" in page
    assert "ModelBuilder" in (tmp_path / "wpsim/core/builder.html").read_text()
