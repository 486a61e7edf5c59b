"""Importing streamer changes nothing outside it: no logging set up, no driver's logger retuned, no signal
handler, no environment variable. Set-up happens when a command runs (util/runtime.log_to, run())."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import importlib, json, logging, os, pkgutil, signal, sys
import streamer

def state():
    loggers = {name: (lg.level, len(lg.filters), len(lg.handlers))
               for name, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    root = logging.getLogger()
    return {"root": [root.level, len(root.handlers)], "loggers": loggers,
            "signals": [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)],
            "environ": sorted(os.environ)}

import aio_pika, aiormq, asyncpg  # the drivers' own loggers exist before streamer's modules load
try:
    import asyncmy
except ImportError:
    pass
before = state()
names = [m.name for m in pkgutil.walk_packages(streamer.__path__, "streamer.") if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
after = state()
changed = {name: [before["loggers"].get(name), value] for name, value in after["loggers"].items()
           if name in before["loggers"] and before["loggers"][name] != value}
print(json.dumps({"modules": len(names), "changed": changed, "root": [before["root"], after["root"]],
                  "signals": before["signals"] == after["signals"], "environ": before["environ"] == after["environ"]}))
"""


def test_importing_every_module_changes_no_logging_signal_or_environment() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["modules"] > 100
    assert result["changed"] == {}, "a module retunes another package's logger when imported"
    assert result["root"][0] == result["root"][1]
    assert result["signals"] and result["environ"]
