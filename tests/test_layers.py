"""The package layout: every module sits in a layer package, imports only its own or a lower
layer, the import graph has no loop, the benchmarks never import the apps, and ``import
wpsim`` stays light.

The layers are those of ``../shared/DESIGN.md`` ("Layers and layout"). The checker parses the
source (every ``import`` statement, also those inside functions), so it needs nothing to be
importable; ``test_checker_catches_planted_violations`` shows that it fails when it should.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LAYERS = {
    "wpsim.kernels": 1,
    "wpsim.core": 2,
    "wpsim.solvers": 3,
    "wpsim.diff": 4,
    "wpsim.io": 5,
    "wpsim.opt": 6,
    "wpsim.tasks": 6,
    "wpsim.apps": 7,
    "wpsim.bench": 7,
    "wpsim.distributed": 7,
    "wpsim": 8,  # the public face, wpsim/__init__.py: above every layer, imported by none
}
FORBIDDEN = (("wpsim.bench", "wpsim.apps"),)
"""(importer package, imported package) pairs of the same layer that must not meet: the
benchmarks never import the apps (the ``wpsim bench`` command line imports the benchmarks)."""
HEAVY = ("pxr", "trimesh", "matplotlib", "scipy", "torch", "ray", "mujoco")
"""Libraries that ``import wpsim`` must not load (imported inside the functions that need them)."""


def module_sources(root: Path = ROOT) -> dict:
    """Module name -> source text of every module of the package (``kernels/`` is ``wpsim.kernels``)."""
    sources = {}
    for folder, package in ((root / "wpsim", "wpsim"), (root / "kernels", "wpsim.kernels")):
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            sources[".".join(parts)] = path.read_text(encoding="utf-8")
    return sources


def is_package(sources: dict, module: str) -> bool:
    """Whether ``module`` has submodules (so that its relative imports resolve inside it)."""
    return any(name.startswith(module + ".") for name in sources)


def import_edges(sources: dict) -> list:
    """(importer, imported module, line) for every import of a package module."""
    edges = []
    for module, text in sources.items():
        base = module.split(".") if is_package(sources, module) else module.split(".")[:-1]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                anchor = base[: len(base) - node.level + 1] if node.level else []
                package = ".".join(anchor + ([node.module] if node.module else []))
                targets = [f"{package}.{a.name}" if f"{package}.{a.name}" in sources else package for a in node.names]
            else:
                continue
            edges += [(module, t, node.lineno) for t in targets if t == "wpsim" or t.startswith("wpsim.")]
    return edges


def layer_of(module: str) -> int | None:
    """The layer of a module: that of the longest layer package containing it (None: none)."""
    owners = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    return LAYERS[max(owners, key=len)] if owners else None


def unplaced_modules(sources: dict) -> list:
    """Modules outside every layer package (e.g. a file sitting flat in wpsim/)."""
    return sorted(m for m in sources if m != "wpsim" and layer_of(m) == LAYERS["wpsim"])


def upward_imports(edges: list) -> list:
    """Messages for imports from a lower layer to a higher one."""
    return [f"{src} (layer {layer_of(src)}) imports {dst} (layer {layer_of(dst)}) at line {line}"
            for src, dst, line in edges if src != "wpsim" and layer_of(dst) > layer_of(src)]


def forbidden_imports(edges: list) -> list:
    """Messages for imports that ``FORBIDDEN`` rules out."""
    def inside(module, package):
        return module == package or module.startswith(package + ".")

    return [f"{src} imports {dst} at line {line} ({importer} never imports {imported})"
            for src, dst, line in edges for importer, imported in FORBIDDEN if inside(src, importer) and inside(dst, imported)]


def package_cycles(edges: list, packages: tuple) -> list:
    """Import loops between the ``packages`` (each module counted as the package holding it)."""
    def owner(module):
        return next((p for p in packages if module == p or module.startswith(p + ".")), None)

    pairs = {(owner(src), owner(dst), line) for src, dst, line in edges}
    return import_cycles([(a, b, line) for a, b, line in pairs if a and b and a != b])


def import_cycles(edges: list) -> list:
    """Every import loop, as a list of modules (each loop once, from its smallest member)."""
    graph = {}
    for src, dst, _ in edges:
        graph.setdefault(src, set()).add(dst)
    cycles, done = set(), set()

    def walk(node, path, on_path):
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_path:
                loop = path[path.index(nxt):]
                start = loop.index(min(loop))
                cycles.add(tuple(loop[start:] + loop[:start]))
            elif nxt not in done:
                walk(nxt, [*path, nxt], on_path | {nxt})
        done.add(node)

    for node in sorted(graph):
        if node not in done:
            walk(node, [node], {node})
    return sorted(list(c) for c in cycles)


def test_every_module_sits_in_a_layer_package():
    sources = module_sources()
    assert len(sources) > 50
    assert unplaced_modules(sources) == []


def test_no_import_points_up_a_layer():
    assert upward_imports(import_edges(module_sources())) == []


def test_no_import_loop():
    assert import_cycles(import_edges(module_sources())) == []


def test_bench_never_imports_apps_and_no_loop_joins_them():
    edges = import_edges(module_sources())
    assert forbidden_imports(edges) == []
    assert package_cycles(edges, ("wpsim.apps", "wpsim.bench", "wpsim.tasks")) == []


def test_checker_catches_planted_violations():
    sources = {
        "wpsim": "from wpsim import core\n",
        "wpsim.core": "",
        "wpsim.core.good": "from wpsim.kernels import enums\nfrom . import other\n",
        "wpsim.core.other": "def f():\n    from ..io import mjcf  # upward, inside a function, relative\n",
        "wpsim.core.facade_user": "import wpsim\n",
        "wpsim.kernels": "",
        "wpsim.kernels.enums": "",
        "wpsim.io": "",
        "wpsim.io.mjcf": "from wpsim.kernels.enums import JOINT_FREE\n",
        "wpsim.bench": "from wpsim.bench.a import run\n",
        "wpsim.bench.a": "from wpsim.bench import b\n",
        "wpsim.bench.b": "def f():\n    from wpsim.bench.a import run\n",
        "wpsim.bench.report": "from ..apps.cli import f  # same layer, but the benchmarks never import the apps\n",
        "wpsim.apps": "",
        "wpsim.apps.cli": "def f():\n    from wpsim.bench import a  # allowed: the command line runs the benchmarks\n",
        "wpsim.tasks": "",
        "wpsim.tasks.scene": "from wpsim.bench import b  # upward: tasks sit below the benchmarks\n",
        "wpsim.flat_module": "",
    }
    edges = import_edges(sources)
    assert ("wpsim.core.good", "wpsim.kernels.enums", 1) in edges
    assert ("wpsim.core.good", "wpsim.core.other", 2) in edges
    assert upward_imports(edges) == [
        "wpsim.core.other (layer 2) imports wpsim.io.mjcf (layer 5) at line 2",
        "wpsim.core.facade_user (layer 2) imports wpsim (layer 8) at line 1",
        "wpsim.tasks.scene (layer 6) imports wpsim.bench.b (layer 7) at line 1",
    ]
    assert import_cycles(edges) == [["wpsim.bench.a", "wpsim.bench.b"]]  # no loop of modules through the apps...
    assert forbidden_imports(edges) == [
        "wpsim.bench.report imports wpsim.apps.cli at line 1 (wpsim.bench never imports wpsim.apps)"]
    assert package_cycles(edges, ("wpsim.apps", "wpsim.bench")) == [["wpsim.apps", "wpsim.bench"]]  # ...but of packages
    assert unplaced_modules(sources) == ["wpsim.flat_module"]


def _python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_import_wpsim_is_light_and_exposes_the_subpackages():
    out = _python(
        "import sys, wpsim\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
        "print(callable(wpsim.io.mjcf.import_mjcf), callable(wpsim.io.urdf.import_urdf),\n"
        "      callable(wpsim.io.usd_export.write_rollouts), callable(wpsim.io.mesh_files.load_surface),\n"
        "      callable(wpsim.opt.Adam), callable(wpsim.bench.run_suites), callable(wpsim.apps.cli.main),\n"
        "      callable(wpsim.tasks.scene_library.box_stack))\n"
    )
    heavy, exposed = out.splitlines()
    assert heavy == "[]"
    assert exposed == "True True True True True True True True"
