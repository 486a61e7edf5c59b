"""Ctrl-C while an endpoint drains: what it waits for and how long; a second Ctrl-C leaves at once, saying what stays."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from streamer.util.urls import EndpointURL

EVENTS = "".join(f"ts=2023-03-03T23:11:0{i}.000000Z event=stampede.xwf.meta level=Info "
                 f"xwf.id=f84f05fc-a8d0-42b5-bac5-52d6f41a77e3 key=k{i} value=v\n" for i in range(3))


def closed_port() -> int:
    """A local port nobody listens on: the broker is away."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Lines:
    """stderr of a child, line by line, read in a thread (no blocking reads in the test)."""

    def __init__(self, stream) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=lambda: [self.queue.put(line) for line in stream], daemon=True).start()

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.queue.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"never saw {text!r} in:\n{''.join(self.seen)}")

    def rest(self) -> str:
        time.sleep(0.5)
        while not self.queue.empty():
            self.seen.append(self.queue.get())
        return "".join(self.seen)


def test_ctrl_c_says_what_the_drain_waits_for_and_a_second_one_what_stays(tmp_path: Path) -> None:
    source = tmp_path / "in.bp"
    source.write_text(EVENTS)
    spool = tmp_path / "spool"
    url = (f"amqp://guest:guest@127.0.0.1:{closed_port()}/%2F/workflows?spool={spool}&drain_timeout=120"
           "&retry_max=1&connect_timeout=1&events=*")
    child = subprocess.Popen([sys.executable, "-m", "streamer", "load", str(source), "--follow", "-q", "--dest", url],
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        lines = Lines(child.stderr)
        lines.wait_for("broker unavailable")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(p.stat().st_size for p in spool.glob("*") if p.is_file()
                                                        and p.name not in ("lock", "head")):
            time.sleep(0.1)  # the three events are in the spool
        child.send_signal(signal.SIGINT)
        waiting = lines.wait_for("waiting up to")
        assert waiting.startswith("streamer: amqp://guest:***@127.0.0.1:") and waiting.rstrip().endswith(
            f"/workflows?{url.split('?')[1]}: waiting up to 120 s for the broker to take 3 spooled events; "
            f"Ctrl-C again leaves them in {spool}")
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=30) == 130
        err = lines.rest()
        assert f"3 events stay in {spool} (the next run with this spool delivers them first)" in err
        assert "Traceback" not in err and "BrokenPipeError" not in err
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("when", ["worker-starting", "reading"])
def test_two_ctrl_c_on_a_replay_with_a_worker_process_never_print_a_traceback(tmp_path: Path, when: str) -> None:
    """`streamer replay --parser process` to an AMQP broker that is away; Ctrl-C twice, as a terminal sends it:
    to the whole foreground process group, the parsing worker included (the old `BrokenPipeError` came from it;
    a Ctrl-C while it was still starting gave `MonitorWorkerError` with a traceback)."""
    from streamer.synth import generate

    submit = generate(tmp_path / "wf", jobs=300, seed=1)
    spool = tmp_path / "spool"
    url = (f"amqp://guest:guest@127.0.0.1:{closed_port()}/%2F/workflows?spool={spool}&drain_timeout=120"
           "&retry_max=1&connect_timeout=1&events=*")
    child = subprocess.Popen([sys.executable, "-m", "streamer", "replay", str(submit), "--parser", "process",
                              "--no-jobstate", "--state", str(tmp_path / "state.json"), "--dest", url],
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                             start_new_session=True)  # its own group: the test's Ctrl-C goes to it alone
    try:
        lines = Lines(child.stderr)
        lines.wait_for("broker unavailable")  # the endpoint is open: the worker is being started now
        if when == "worker-starting":
            time.sleep(0.2)  # the worker is importing streamer (before this fix: a traceback, exit 1)
        else:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(
                    p.stat().st_size for p in spool.glob("*") if p.is_file() and p.name not in ("lock", "head")):
                time.sleep(0.1)  # events are flowing into the spool
        os.killpg(child.pid, signal.SIGINT)
        lines.wait_for("waiting up to 120 s for the broker")
        os.killpg(child.pid, signal.SIGINT)
        assert child.wait(timeout=30) == 130  # docs/guide/replay-follow.md, Ctrl-C: 130
        err = lines.rest()
        assert "streamer: second signal: exiting without flushing" in err
        for noise in ("Traceback", "BrokenPipeError", "MonitorWorkerError", "RuntimeWarning", "Exception ignored"):
            assert noise not in err, err
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def test_the_first_ctrl_c_with_nothing_spooled_yet_says_so(tmp_path: Path) -> None:
    """A server that is down and a spool still empty: the line says what a second Ctrl-C does, not `them`."""
    import asyncio

    from streamer.endpoints import create_endpoint
    from streamer.endpoints.layers.waiting import left_behind, waiting_for

    async def run() -> tuple[str | None, str | None]:
        spool = tmp_path / "spool"
        endpoint = create_endpoint(EndpointURL.parse(f"postgresql://postgres@127.0.0.1:9/nowhere?spool={spool}&drain_timeout=7"
                                   "&retry_for=0.2"))
        await endpoint.open()  # the server is away: the endpoint opens, spooling
        try:
            return waiting_for(endpoint), left_behind(endpoint)
        finally:
            endpoint.drain_timeout = 0
            await endpoint.close()

    said, left = asyncio.run(run())
    assert said is not None and said.endswith(
        ": waiting up to 7 s for the server (unreachable; nothing spooled yet); Ctrl-C again stops at once, "
        "and the next run reads again what was not delivered"), said
    assert left is None
