"""The mypyc-compiled modules: in use whenever they are built (so the suite's main pass runs them and its
pure-Python pass does not), never over an edited source, and `streamer --version` says which code runs."""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.util import compiled
from tests.conftest import IN_CI
from tests.support.commands import streamer

ROOT = Path(__file__).resolve().parents[2]
SO = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def _manifest() -> dict[str, object]:
    return json.loads(compiled.MANIFEST.read_text(encoding="utf-8"))


def test_built_where_mypyc_and_a_compiler_are_there() -> None:
    """CI has both (mypy is a test dependency): a build that silently failed would leave one pass, not two."""
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        pytest.skip("mypyc is not installed")
    if not shutil.which("cc") and not shutil.which("gcc"):
        pytest.skip("no C compiler")
    if not IN_CI and not compiled.MANIFEST.exists():
        pytest.skip("not built here (scripts/test.sh builds it; so does pip install)")
    manifest = _manifest()
    assert "streamer.monitor.parsers.yamlsub" in manifest["modules"]  # type: ignore[operator]
    assert "streamer.monitor.engine.jobs" in manifest["modules"]  # type: ignore[operator]


def test_the_compiled_modules_run_when_built_and_never_in_pure_python_mode() -> None:
    if not compiled.MANIFEST.exists():
        assert not compiled.active()
        pytest.skip("not built")
    names = list(_manifest()["modules"])  # type: ignore[call-overload]
    files = {name: importlib.import_module(name).__file__ or "" for name in names}
    if compiled.pure():
        assert not compiled.active()
        assert {name for name, file in files.items() if not file.endswith(".py")} == set()
        assert compiled.describe().startswith("interpreted (STREAMER_PURE_PYTHON is set)")
    else:
        assert compiled.active(), compiled.describe()
        assert compiled.compiled_modules() == sorted(names)
        assert {name for name, file in files.items() if not file.endswith(SO)} == set()
        assert all(Path(file).is_relative_to(compiled.BUILD) for file in files.values())
        assert compiled.describe().startswith(f"mypyc-compiled ({len(names)} modules)")


def test_version_names_the_code_in_use() -> None:
    plain = streamer("--version", env={"STREAMER_PURE_PYTHON": ""}, check=True).stdout
    pure = streamer("--version", env={"STREAMER_PURE_PYTHON": "1"}, check=True).stdout
    assert pure == "streamer 0.1.0 (interpreted (STREAMER_PURE_PYTHON is set), no C codec)\n"
    if compiled.MANIFEST.exists():
        assert plain.startswith(f"streamer 0.1.0 (mypyc-compiled ({len(_manifest()['modules'])} modules), ")  # type: ignore[arg-type]
    else:
        assert plain.startswith("streamer 0.1.0 (interpreted (not built (no mypyc or C compiler at install)), ")


def test_importing_streamer_alone_runs_the_source_even_beside_a_build() -> None:
    """Only activate() (the entry point, conftest) changes what an import loads: no import-time effect."""
    probe = ("import sys, streamer.monitor.parsers.yamlsub as m; "
             "print(m.__file__, any(type(f).__name__ == '_Finder' for f in sys.meta_path))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          check=True)
    assert done.stdout == f"{ROOT / 'streamer/monitor/parsers/yamlsub.py'} False\n"


def test_an_edited_source_is_never_shadowed_by_an_older_build(tmp_path: Path) -> None:
    name = "streamer.monitor.parsers.yamlsub"
    digest = hashlib.sha256((ROOT / "streamer/monitor/parsers/yamlsub.py").read_bytes()).hexdigest()
    suffix = SO[0]
    manifest = {"suffix": suffix, "group": "g__mypyc", "modules": {name: digest}}
    assert compiled._paths(manifest, tmp_path) == f"incomplete build: {name}, g__mypyc missing"
    files = {name: tmp_path / f"streamer/monitor/parsers/yamlsub{suffix}", "g__mypyc": tmp_path / f"g__mypyc{suffix}"}
    for file in files.values():
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(b"")
    assert compiled._paths(manifest, tmp_path) == files
    edited = compiled._paths({**manifest, "modules": {name: "0" * 64}}, tmp_path)
    assert edited == f"source changed since the build: {name} (reinstall to rebuild)"
    other = compiled._paths({**manifest, "suffix": ".cpython-39-x86_64-linux-gnu.so"}, tmp_path)
    assert other == "built for another Python (.cpython-39-x86_64-linux-gnu.so)"
