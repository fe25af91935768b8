"""Sphinx configuration of the wpsim guides (Markdown through MyST). The API reference is
built beside them by pdoc: ``python -m wpsim.apps.docs_site --out DIR`` builds both."""

import sys
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

project = "wpsim"
release = version = metadata.version("wpsim")
extensions = ["myst_parser", "record_tables"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3
html_theme = "alabaster"
html_title = f"wpsim {release}"
html_theme_options = {"description": "a differentiable physics simulator on NVIDIA Warp"}
