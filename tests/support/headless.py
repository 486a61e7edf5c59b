"""Headless Chromium driven over the DevTools protocol (`--remote-debugging-pipe`: JSON messages ended by NUL on
fds 3 and 4, no extra dependency), with every off-site request answered from a dict of URL -> (body, type).

Requests to 127.0.0.1 go to the network; any other URL the dict lacks fails (as offline) and is recorded in
`Browser.unserved`, so a test can tell that a page asked for something it was not given.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage",
         "--hide-scrollbars", "--ignore-certificate-errors", "--remote-debugging-pipe"]
# page settled: loaded, no jQuery request in flight, no DataTables "Processing..." shown
_BUSY = ("document.readyState !== 'complete' || (window.jQuery && jQuery.active > 0) || "
         "Array.from(document.querySelectorAll('.dataTables_processing'))"
         ".some(e => getComputedStyle(e).display !== 'none')")


def _high(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class Browser:
    def __init__(self, chromium: str, served: dict[str, tuple[bytes, str]], width: int = 1400,
                 height: int = 1100) -> None:
        self.served, self.unserved, self.size = served, [], (width, height)
        # the browser's ends go to fds 3 and 4 in the child: first move them out of the way of those numbers
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        to_browser, from_browser = (_high(to_browser), _high(from_browser))

        def fds() -> None:
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self.proc = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=fds)
        os.close(to_browser)
        os.close(from_browser)
        self._next = 0
        self._inbox: queue.Queue = queue.Queue()
        threading.Thread(target=self._reader, daemon=True).start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Fetch.enable", session=True, patterns=[{"urlPattern": "*"}])
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _reader(self) -> None:
        pending = b""
        while chunk := os.read(self._read, 1 << 16):
            pending += chunk
            *messages, pending = pending.split(b"\0")
            for message in messages:
                self._inbox.put(json.loads(message))
        os.close(self._read)
        self._inbox.put(None)

    def _send(self, method: str, params: dict, session: bool) -> int:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        return self._next

    def _handle(self, message: dict) -> None:
        if message.get("method") != "Fetch.requestPaused":
            return
        params = message["params"]
        url, request = params["request"]["url"], params["requestId"]
        if urlsplit(url).hostname == "127.0.0.1":
            self._send("Fetch.continueRequest", {"requestId": request}, True)
        elif url in self.served:
            body, kind = self.served[url]
            self._send("Fetch.fulfillRequest", {
                "requestId": request, "responseCode": 200, "body": base64.b64encode(body).decode(),
                "responseHeaders": [{"name": "Content-Type", "value": kind},
                                    {"name": "Access-Control-Allow-Origin", "value": "*"}]}, True)
        else:
            self.unserved.append(url)
            self._send("Fetch.failRequest", {"requestId": request, "errorReason": "NameNotResolved"}, True)

    def _pump(self, until: float, want: int | None = None) -> dict | None:
        while True:
            try:
                message = self._inbox.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                if want is None:
                    return None
                raise TimeoutError(f"Chromium did not answer DevTools call {want}")
            if message is None:
                raise RuntimeError(f"Chromium ended (exit {self.proc.poll()})")
            if want is not None and message.get("id") == want:
                if "error" in message:
                    raise RuntimeError(f"DevTools: {message['error']}")
                return message.get("result", {})
            self._handle(message)

    def call(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        return self._pump(time.monotonic() + timeout, self._send(method, params, session))

    def wait(self, seconds: float) -> None:
        """Let the page run (answering its requests) for a while."""
        self._pump(time.monotonic() + seconds)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def settle(self, timeout: float = 90, quiet: float = 2.0) -> str:
        """Wait until the page is loaded, idle and its text has not changed for `quiet` seconds; its text."""
        deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
        while True:
            busy = self.evaluate(_BUSY)
            text = self.evaluate("document.body ? document.body.innerText : ''")
            if busy or text != last:
                last, since = text, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return text
            if time.monotonic() > deadline:
                raise TimeoutError(f"page did not settle in {timeout} s (busy={busy}): {text[-1000:]!r}")
            self.wait(0.25)

    def open(self, url: str) -> str:
        self.call("Page.navigate", session=True, url=url)
        return self.settle()

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self._send("Browser.close", {}, False)
            self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._write)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()
