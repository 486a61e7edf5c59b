"""The run's process settings (`util/runtime`): how many glibc malloc arenas its threads share."""

from __future__ import annotations

import subprocess
import sys

import pytest

# a child that starts 8 threads, each allocating once (glibc hands each thread that allocates an arena of its own,
# up to 8 per core, unless limited), and prints how many heaps malloc_info then reports
CHILD = r"""
import ctypes, sys, threading
from streamer.util.runtime import limit_malloc_arenas
print(limit_malloc_arenas() if sys.argv[1] == "limit" else "-")
barrier = threading.Barrier(8)
def allocate():
    barrier.wait()
    keep.append(bytearray(200_000))
    barrier.wait()
keep = []
threads = [threading.Thread(target=allocate) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
libc = ctypes.CDLL(None)
libc.open_memstream.restype = ctypes.c_void_p
libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
text, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = libc.open_memstream(ctypes.byref(text), ctypes.byref(size))
libc.malloc_info(0, stream)
libc.fclose(stream)
print(ctypes.string_at(text, size.value).decode().count("<heap nr="))
"""


def _heaps(mode: str, env: dict[str, str] | None = None) -> tuple[str, int]:
    import os

    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60,
                          env={**{k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}, **(env or {})})
    assert done.returncode == 0, done.stderr
    said, heaps = done.stdout.split()
    return said, int(heaps)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and malloc_info")
def test_a_run_s_threads_share_two_malloc_arenas() -> None:
    assert _heaps("limit") == ("True", 2)
    said, heaps = _heaps("default")
    assert heaps > 2, "glibc gave the threads no arenas of their own: this test shows nothing here"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and malloc_info")
def test_the_user_s_malloc_arena_max_is_left_alone() -> None:
    assert _heaps("limit", {"MALLOC_ARENA_MAX": "4"}) == ("False", 4)
