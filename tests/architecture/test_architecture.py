"""The code's shape, checked: module sizes, the Stampede-free core, ruff and mypy clean."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "streamer"
MAX_LINES = 500
DATA_TABLES = {"endpoints/db/schema/stampede.py", "endpoints/db/schema/mysql.py", "endpoints/db/schema/provenance.py"}
"""Schema data tables: long by nature, no logic to split."""
PENDING: dict[str, str] = {}
"""Modules over the limit whose split is another change's; each must still be over it (else drop it here)."""


def _sizes() -> dict[str, int]:
    return {str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
            for path in sorted(PACKAGE.rglob("*.py"))}


def test_no_module_in_the_package_exceeds_500_lines() -> None:
    sizes = _sizes()
    over = {name: lines for name, lines in sizes.items()
            if lines > MAX_LINES and name not in DATA_TABLES and name not in PENDING}
    assert over == {}, f"modules over {MAX_LINES} lines (split them by concern): {over}"
    stale = [name for name in PENDING if sizes.get(name, 0) <= MAX_LINES]
    assert stale == [], f"no longer over {MAX_LINES} lines: remove from PENDING: {stale}"


TESTS = ROOT / "tests"
NOT_A_MODULE = {
    "architecture": "the package's shape as a whole",
    "deploy": "deploy/ and logstash/, beside the package",
    "bench": "bench/, beside the package (its shared measuring module)",
}
"""Test directories that name no module of streamer/ (keep this list small)."""


def test_tests_mirror_the_package() -> None:
    """A test module lives in tests/<name>/, where streamer/<name>/ or streamer/<name>.py is what it mainly tests;
    every test directory is a package (test modules of the same name in two directories stay apart)."""
    assert sorted(path.name for path in TESTS.glob("test_*.py")) == [], "move these into tests/<package>/"
    directories = {path.parent.relative_to(TESTS) for path in TESTS.rglob("test_*.py")}
    assert len(directories) >= 10
    unmatched = sorted(str(rel) for rel in directories if not (PACKAGE / rel).is_dir()
                       and not (PACKAGE / rel).with_suffix(".py").is_file() and str(rel) not in NOT_A_MODULE)
    assert unmatched == [], f"tests/<name>/ with no streamer/<name>/ nor streamer/<name>.py: {unmatched}"
    no_init = sorted(str(rel) for rel in directories
                     for package in [rel, *rel.parents] if not (TESTS / package / "__init__.py").is_file())
    assert no_init == [], f"add __init__.py to: {no_init}"
    stale = sorted(set(NOT_A_MODULE) - {str(rel) for rel in directories})
    assert stale == [], f"no tests left in: {stale}"


def _imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every import in a module of the package, lazy ones inside functions too;
    `from a.b import c` gives `a.b.c` (a submodule or a name in `a.b`: `_graph` finds which)."""
    module = ".".join(path.relative_to(root).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module.removesuffix(".__init__")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


CORE = {"bus", "filters", "spool", "overflow", "options", "record", "sink", "retry"}
"""The modules the core must hold: the bus and everything it stands on (issue 17)."""


def test_the_core_imports_nothing_of_streamer_outside_it() -> None:
    """The core knows records and codecs, not Stampede, the monitor, endpoints or sources."""
    modules = sorted((PACKAGE / "core").rglob("*.py"))
    assert CORE <= {path.stem for path in modules}, "a module of the core moved out of streamer/core"
    leaks = [f"{path.relative_to(ROOT)}:{line}: imports {name}"
             for path in modules
             for line, name in _imports(path)
             if name.split(".")[0] == "streamer" and not name.startswith("streamer.core")]
    assert leaks == []


def test_the_import_walker_sees_relative_and_lazy_imports(tmp_path: Path) -> None:
    """The checks below would pass vacuously if `_imports` missed `from ..x import y`, `from . import z` or an
    import inside a function."""
    module = tmp_path / "streamer" / "pkg" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text("from ..events import Event\nfrom . import sibling\n\n\ndef f():\n    import streamer.cli.main\n")
    assert [name for _, name in _imports(module, tmp_path)] == [
        "streamer.events.Event", "streamer.pkg.sibling", "streamer.cli.main"]
    assert "streamer.core.record.Record" in [name for _, name in _imports(PACKAGE / "core" / "bus.py")]


LAYERS: list[set[str]] = [
    {"util", "core"},
    {"events"},
    {"amqp"},
    {"sources", "endpoints"},
    {"config"},
    {"monitor"},
    {"console"},
    {"run", "synth"},
    {"status", "serve", "monitord", "docs"},
    {"cli"},
]
"""The package's layers, lowest first: a module imports its own package and the layers below it, never a sibling
of its own layer nor anything above (lazy imports inside functions count too)."""
TOP_LEVEL = {"__init__.py", "__main__.py"}


def _rank() -> dict[str, int]:
    return {name: index for index, layer in enumerate(LAYERS) for name in layer}


def test_every_package_has_a_layer_and_nothing_is_loose_at_the_top() -> None:
    loose = sorted(path.name for path in PACKAGE.glob("*.py") if path.name not in TOP_LEVEL)
    assert loose == [], f"modules loose at streamer/'s top (give them a package): {loose}"
    packages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    assert packages - set(_rank()) == set(), "a package with no layer: add it to LAYERS"
    assert set(_rank()) - packages == set(), "LAYERS names a package that is gone"


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "streamer" else None


def _graph() -> dict[str, set[str]]:
    """module -> the modules of streamer it imports (a package's `__init__` by the package's name)."""
    modules = {".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
               for path in PACKAGE.rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = {known(name) for _, name in _imports(path) if name.split(".")[0] == "streamer"}
        graph[module] = {target for target in targets if target and target != module}
    return graph


def test_lower_layers_never_import_higher_ones() -> None:
    rank = _rank()
    wrong = []
    for module, targets in sorted(_graph().items()):
        here = _package_of(module)
        if here is None or here == "__main__":
            continue
        for target in sorted(targets):
            there = _package_of(target)
            if there is None or there == here:
                continue
            if rank[there] >= rank[here]:
                wrong.append(f"{module} imports {target} ({here} is layer {rank[here]}, {there} layer {rank[there]})")
    assert wrong == [], "\n".join(wrong)


def test_no_import_circles() -> None:
    """No two modules need each other, directly or round a longer circle (Tarjan's strongly connected parts)."""
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert circles == []


def test_the_layer_checks_can_fail() -> None:
    """The walker sees a lazy import inside a function (config's endpoint check) and a package's own imports."""
    graph = _graph()
    assert "streamer.endpoints" in graph["streamer.config.settings"]
    assert "streamer.events.event" in graph["streamer.events"]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} is not installed (pip install -e '.[test]')")
    return found


def test_ruff_is_clean() -> None:
    result = subprocess.run([_tool("ruff"), "check", "--no-cache", "--output-format", "concise"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean_on_the_whole_package() -> None:
    """pyproject's [tool.mypy] settings on every module of streamer (strict: the core below, the events in
    tests/events/test_events_typing.py)."""
    result = subprocess.run([_tool("mypy"), "--no-incremental", "streamer"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_mypy_is_strict_on_the_core() -> None:
    """`mypy --strict` itself, not pyproject's per-module flags (mypy has no per-module `strict`);
    streamer/events: tests/events/test_events_typing.py."""
    result = subprocess.run([_tool("mypy"), "--strict", "--follow-imports=silent", "--no-incremental", "streamer/core"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout
