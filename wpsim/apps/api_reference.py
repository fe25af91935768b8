"""The API reference: HTML pages generated from the docstrings of every wpsim module by
pdoc (the ``docs`` extra), one page per module, with a search index.

``python -m wpsim.apps.api_reference --out DIR`` writes ``DIR/index.html``. Every module is
named to pdoc explicitly, since a package's ``__all__`` would otherwise hide its
submodules; importing a module that needs an optional extra (torch) fails the build rather
than leaving its page out.
"""

from __future__ import annotations

import argparse
import pkgutil
import sys
import warnings
from pathlib import Path


def module_names() -> list:
    """Every module of the wpsim package (sub-packages included), sorted."""
    import wpsim.kernels

    names = {"wpsim", "wpsim.kernels"}
    package = str(Path(__file__).resolve().parents[1])  # the wpsim folder
    # wpsim.kernels is installed from the top-level kernels/ folder, outside wpsim's own
    for path, prefix in (([package], "wpsim."), (wpsim.kernels.__path__, "wpsim.kernels.")):
        names.update(info.name for info in pkgutil.walk_packages(path, prefix=prefix))
    return sorted(names)


def build(out) -> Path:
    """Write the API reference of every wpsim module into the folder ``out``; returns the
    path of its index page."""
    import pdoc
    import pdoc.render

    out = Path(out)
    pdoc.render.configure(docformat="google", footer_text="wpsim API reference")
    with warnings.catch_warnings():  # a package's spec adds some submodules that are also named
        warnings.filterwarnings("ignore", message=".*but a module with this name has already been added")
        pdoc.pdoc(*module_names(), output_directory=out)
    return out / "index.html"


def main(argv=None) -> int:
    """Command line: ``--out DIR`` (default ./wpsim_out/api)."""
    parser = argparse.ArgumentParser(description="build the wpsim API reference (HTML, needs pdoc)")
    parser.add_argument("--out", default="wpsim_out/api", help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    index = build(args.out)
    print(f"wrote {index} ({len(module_names())} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
