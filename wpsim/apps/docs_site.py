"""The documentation site: the guides of ``docs/`` (Markdown, built by Sphinx with MyST,
warnings as errors) and, under ``api/``, the API reference of every module (pdoc, see
``wpsim.apps.api_reference``). Needs the ``docs`` extra and a source checkout (the guides
are not installed with the package).

``python -m wpsim.apps.docs_site --out DIR`` writes ``DIR/index.html``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wpsim.apps.api_reference import build as build_api_reference

DOCS = Path(__file__).resolve().parents[2] / "docs"
"""The guides' source folder of this checkout."""


def build_guides(out, docs=DOCS) -> Path:
    """Build the guides from ``docs`` into the folder ``out`` with Sphinx; any warning (a
    broken link, a bad directive) fails the build with a ``RuntimeError``, the warnings
    printed above it. Returns the path of the index page."""
    from sphinx.cmd.build import build_main

    docs, out = Path(docs), Path(out)
    if not (docs / "conf.py").is_file():
        raise FileNotFoundError(f"{docs}: no Sphinx conf.py here; the guides come with a source checkout of wpsim")
    status = build_main(["-W", "--keep-going", "-q", "-b", "html", "-d", str(out / ".doctrees"), str(docs), str(out)])
    if status != 0:
        raise RuntimeError(f"building the guides of {docs} failed (exit status {status}); the warnings are above")
    return out / "index.html"


def build(out, docs=DOCS) -> Path:
    """The whole site: the guides (``build_guides``) and the API reference in ``out/api``;
    returns the path of the index page."""
    index = build_guides(out, docs)
    build_api_reference(Path(out) / "api")
    return index


def main(argv=None) -> int:
    """Command line: ``--out DIR`` (default ./wpsim_out/site)."""
    parser = argparse.ArgumentParser(description="build the wpsim guides and API reference (HTML; needs the docs extra)")
    parser.add_argument("--out", default="wpsim_out/site", help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    print(f"wrote {build(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
