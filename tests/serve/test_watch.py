"""streamer/serve/watch.py: the tree watcher's inotify watches."""

from __future__ import annotations

from pathlib import Path


from streamer.serve.watch import TreeWatcher
from tests.conftest import unavailable


def test_a_workflow_that_ends_after_the_watcher_closed_is_forgotten_quietly(tmp_path: Path) -> None:
    """serve's shutdown closes the watcher while followers still finish: each then forgets its directory."""
    run = tmp_path / "runs" / "wf1"
    run.mkdir(parents=True)
    watcher = TreeWatcher([tmp_path / "runs"], lambda directory: None, lambda path: None)
    watcher.start()
    if not watcher.inotify:
        unavailable("no inotify on this machine")
    watcher._walk(str(tmp_path / "runs"))
    assert watcher.watched == 2  # the root and the run below it
    watcher.close()
    watcher.forget(str(run))  # was: AttributeError ('NoneType' object has no attribute 'rm_watch')
    assert watcher.watched == 1
