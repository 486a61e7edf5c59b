"""What `serve` exposes to observers (the metrics endpoint, tests): read-only, no bookkeeping of its own.

    state = ServeState()               # handed to Supervisor(config, state=state)
    state.active_workflows()           # submit dirs followed right now (streamer_workflows_active)
    state.events_in()                  # {submit dir: events read from it so far, this process}
    state.on_change(callback)          # called with (submit_dir, "started" | "finished" | "detached")
"""

from __future__ import annotations

from typing import Any, Callable


class ServeState:
    def __init__(self) -> None:
        self._sources: dict[str, Any] = {}
        self._counts: dict[str, int] = {}
        self._listeners: list[Callable[[str, str], None]] = []

    def active_workflows(self) -> list[str]:
        return sorted(self._sources)

    def events_in(self) -> dict[str, int]:
        counts = dict(self._counts)
        for path, source in self._sources.items():
            counts[path] = counts.get(path, 0) + source.events_in
        return counts

    def on_change(self, callback: Callable[[str, str], None]) -> None:
        self._listeners.append(callback)

    # -- called by the supervisor -------------------------------------------------------------
    def started(self, path: str, source: Any) -> None:
        self._sources[path] = source
        self._emit(path, "started")

    def ended(self, path: str, how: str) -> None:
        source = self._sources.pop(path, None)
        if source is not None:
            self._counts[path] = self._counts.get(path, 0) + source.events_in
        if how == "finished":  # memory bounded by active workflows: forget a finished one's count
            self._counts.pop(path, None)
        self._emit(path, how)

    def _emit(self, path: str, how: str) -> None:
        for callback in self._listeners:
            callback(path, how)
