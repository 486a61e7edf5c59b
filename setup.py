"""Builds the optional compiled code; everything else is in pyproject.toml.

Two accelerators, both optional (without them the install still succeeds and
streamer runs its Python code: same results, slower):

- the C codec of events, `streamer/events/_codec.c`, built when a C compiler is there;
- the hot modules below compiled by mypyc from their own Python source, when mypyc (mypy)
  and a C compiler are there. They go to `streamer/_compiled/` with a manifest of their
  sources' hashes, beside (not over) the .py files: `streamer.util.compiled.activate()`
  (the entry point's first call) puts them in use only when every hash still matches and
  `STREAMER_PURE_PYTHON` is not set. A failed compile prints why and leaves them out.
  The build is cached under ~/.cache/streamer/mypyc, keyed by the sources, mypy and Python;
  `STREAMER_NO_MYPYC=1` skips it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import traceback
from pathlib import Path

from setuptools import Distribution, Extension, setup
from setuptools.command.build_ext import build_ext

COMPILED = {  # module -> its C source
    "streamer.events._codec": "streamer/events/_codec.c",
}

HEADERS = ["streamer/events/_buffer.h", "streamer/events/_blake2b.h"]  # included by the C file (and in the sdist)

MYPYC = [  # the modules mypyc compiles (docs/internals/performance.md, "Compiled modules": why these)
    # not runner.py (one call per step; tests stand fakes in for its typed MonitorCore) nor engine/state.py
    # (a checkpoint's record: its fields take what a state file holds before they are checked)
    "streamer/monitor/parsers/kickstart.py",
    "streamer/monitor/parsers/yamlsub.py",
    "streamer/monitor/parsers/dagman.py",
    "streamer/monitor/parsers/jobstate.py",
    "streamer/monitor/engine/jobs.py",
    "streamer/monitor/engine/job.py",
    "streamer/monitor/engine/invocations.py",
    "streamer/monitor/engine/outputs.py",
    "streamer/monitor/engine/workflow.py",
    "streamer/monitor/engine/context.py",
    "streamer/monitor/engine/events.py",
    "streamer/monitor/engine/dagfile.py",
    "streamer/monitor/tracker.py",
    "streamer/monitor/snapshot.py",
    "streamer/events/bp.py",
    "streamer/events/canonical.py",
    "streamer/events/event.py",
    "streamer/events/constraints.py",
    "streamer/sources/decode.py",
    "streamer/util/tail.py",
]

GROUP = "streamer_compiled"  # the shared library's name: streamer_compiled__mypyc
OUT = Path("streamer", "_compiled")  # under the build (or source, in place) tree
MANIFEST = "manifest.json"


def _say(text: str) -> None:
    print(f"streamer setup.py: {text}", file=sys.stderr, flush=True)


def _key(mypy_version: str) -> str:
    digest = hashlib.sha256()
    for part in (mypy_version, sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "", GROUP, *MYPYC):
        digest.update(part.encode() + b"\0")
    for path in MYPYC:
        digest.update(Path(path).read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def _manifest(mypy_version: str) -> dict[str, object]:
    return {"mypy": mypy_version, "group": GROUP + "__mypyc",
            "suffix": sysconfig.get_config_var("EXT_SUFFIX"),
            "modules": {path[:-3].replace("/", "."): hashlib.sha256(Path(path).read_bytes()).hexdigest()
                        for path in MYPYC}}


def _compile(into: Path) -> None:
    """mypyc-compile MYPYC into `into` (the .so files, their tree under it, and the manifest)."""
    from mypyc.build import mypycify  # ImportError: no mypyc, nothing compiled
    import mypy.version

    with tempfile.TemporaryDirectory(prefix="streamer-mypyc-") as tmp:
        extensions = mypycify(MYPYC, opt_level="3", target_dir=str(Path(tmp, "c")), group_name=GROUP)
        sub = build_ext(Distribution({"ext_modules": extensions, "script_name": "setup.py"}))
        sub.build_lib = str(Path(tmp, "lib"))
        sub.build_temp = str(Path(tmp, "temp"))
        sub.inplace = False
        sub.ensure_finalized()
        sub.run()
        built = Path(tmp, "lib")
        for so in built.rglob("*.so"):
            target = into / so.relative_to(built)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(so, target)
    (into / MANIFEST).write_text(json.dumps(_manifest(mypy.version.__version__), indent=1) + "\n")


def build_compiled(root: Path) -> None:
    """The mypyc modules into root/streamer/_compiled, from the cache when the same sources were built."""
    out = root / OUT  # a build already there is left as it is unless replaced: it is used only while current
    if os.environ.get("STREAMER_NO_MYPYC"):
        _say("STREAMER_NO_MYPYC is set: the hot modules stay interpreted")
        return
    try:
        import mypy.version
    except ImportError:
        _say("mypyc (mypy) is not installed: the hot modules stay interpreted")
        return
    caches = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "streamer", "mypyc")
    try:
        if not _mkdir(caches):
            caches = Path(tempfile.mkdtemp(prefix="streamer-mypyc-"))
        cache = caches / _key(mypy.version.__version__)
        if not (cache / MANIFEST).is_file():
            fresh = Path(tempfile.mkdtemp(prefix="build-", dir=caches))
            try:
                _say(f"compiling {len(MYPYC)} modules with mypyc {mypy.version.__version__} (cached in {cache})")
                _compile(fresh)
                if not cache.exists():  # else another build finished first: same sources, same result
                    os.replace(fresh, cache)
            finally:
                shutil.rmtree(fresh, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(cache, out)
    except Exception:  # optional: the install goes on interpreted
        traceback.print_exc()
        _say("the mypyc build failed (above): the hot modules stay interpreted")


def _mkdir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        return True
    except OSError:
        return False


class BuildExt(build_ext):
    """The C codec as before, then the mypyc modules (both optional)."""

    def run(self) -> None:
        super().run()
        in_place = self.inplace or getattr(self, "editable_mode", False)
        build_compiled(Path(".") if in_place else Path(self.build_lib))


setup(
    ext_modules=[
        Extension(name, [source], depends=HEADERS, optional=True, extra_compile_args=["-O2"])
        for name, source in COMPILED.items()
    ],
    cmdclass={"build_ext": BuildExt},
)
