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
MAX_LINES = 600
DATA_TABLES = {"endpoints/stampede_schema.py", "endpoints/stampede_schema_mysql.py", "endpoints/provenance_schema.py"}
"""Schema data tables: long by nature, no logic to split."""
PENDING = {
}
"""Modules over the limit whose split is another change's; each must still be over it (else drop it here)."""


def _sizes() -> dict[str, int]:
    return {str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
            for path in sorted(PACKAGE.rglob("*.py"))}


def test_no_module_in_the_package_exceeds_600_lines() -> None:
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


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a module of the package."""
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
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
            found.extend((node.lineno, f"{base}.{alias.name}" if not node.module else base) for alias in node.names)
    return found


CORE = {"bus", "filters", "spool", "overflow", "options", "record", "sink", "dbnaming", "retry"}
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


def test_the_import_walker_sees_relative_imports(tmp_path: Path) -> None:
    """The check above would pass vacuously if `_imports` missed `from ..events import x` or `from .x import y`."""
    names = [name for _, name in _imports(PACKAGE / "endpoints" / "base.py")]
    assert "streamer.events" in names and "streamer.endpoints.options" in names
    assert "streamer.core.record" in [name for _, name in _imports(PACKAGE / "core" / "bus.py")]


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
