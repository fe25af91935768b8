"""Sub-modules imported on first attribute access (PEP 562), so that a package can list them
without loading their heavy dependencies at ``import wpsim``."""

from __future__ import annotations

import importlib


def lazy_submodules(package: str, names: tuple, namespace: dict):
    """``(__getattr__, __dir__)`` for the package module ``package`` whose globals are
    ``namespace``: ``package.<name>`` imports ``package.name`` when first used."""

    def __getattr__(name: str):
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
