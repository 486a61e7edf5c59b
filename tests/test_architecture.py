"""The code's shape, checked: module sizes, the Stampede-free core, ruff and mypy clean."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "streamer"
MAX_LINES = 600
DATA_TABLES = {"endpoints/stampede_schema.py", "endpoints/stampede_schema_mysql.py", "endpoints/provenance_schema.py"}
"""Schema data tables: long by nature, no logic to split."""
PENDING = {
    "monitor/kickstart.py": "split by issue 17 item 4 (wt17b)",
    "endpoints/amqp.py": "its connection helpers move to a neutral module (wt13b)",
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
