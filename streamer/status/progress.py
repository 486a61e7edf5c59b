"""DAG progress from `*.dag.dagman.out` files, read as pegasus-status reads them (no condor_q).

pegasus-status walks the submit directory (depth first, not following
symbolic links) for files ending in `.dag.dagman.out`; the one in the submit
directory itself is the `root` DAG, every other one is keyed by its DAG's base
name. In each file it keeps the last DAGMan node table:

    11/14/23 22:13:20 DAG status: 0 (DAG_STATUS_OK)
    11/14/23 22:13:20 Of 8 nodes total:
    11/14/23 22:13:20  Done     Pre   Queued    Post   Ready   Un-Ready   Failed   Futile
    11/14/23 22:13:20   ===     ===      ===     ===     ===        ===      ===      ===
    11/14/23 22:13:20     3       0        2       0       0          3        0        0

and the DAG's state: Failure when the DAG status is not 0, Success at 100 %,
else Running; an `EXITING WITH STATUS n` line makes it Success (n = 0) or
Failure. `DagmanProgress` does the same incrementally (only new complete lines
are read on each poll), so `--watch` costs little on a large dagman.out.
The lines are read by the one DAGMan grammar (`monitor/parsers/dagman.py`,
`progress`): a line means here what it means to the monitor, the stamp may
carry HTCondor's debug category (`(D_ALWAYS)`), and only DAGMan's own exit
line ends the DAG.
"""

from __future__ import annotations

import os
from pathlib import Path

from streamer.events.tally.counts import FAILURE, RUNNING, SUCCESS, DagCounts
from streamer.monitor.parsers.dagman import DagStatus, Finished, NodeCounts, NodesTotal, progress

SUFFIX = ".dag.dagman.out"
READ_BLOCK = 1 << 20


def dag_base(path: str) -> str:
    """`inner.dag.dagman.out` -> `inner` (what pegasus-status keys a sub-workflow by)."""
    return Path(Path(Path(Path(path).name).stem).stem).stem


def find_dagmans(submit_dir: str) -> list[str]:
    """Every `*.dag.dagman.out` under `submit_dir`, in pegasus-status's (os.walk) order."""
    found = []
    for root, _dirs, files in os.walk(submit_dir, topdown=True, followlinks=False):
        for name in files:
            if name.endswith(SUFFIX):
                found.append(os.path.join(root, name))
    return found


class DagmanProgress:
    """The last node table and the state of one dagman.out, read as it grows."""

    def __init__(self, path: str, key: str, dagname: str) -> None:
        self.path = path
        self.key = key
        self.counts = DagCounts(dagname=dagname)
        self.offset = 0
        self.lines = 0
        self._identity: tuple[int, int] | None = None
        self._dag_status = 0
        self._total: int | None = None
        self._partial = b""

    def poll(self) -> bool:
        """Read what was appended since the last poll; True when anything was read."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        identity = (st.st_dev, st.st_ino)
        if self._identity not in (None, identity) or st.st_size < self.offset:  # replaced or truncated
            self.__init__(self.path, self.key, self.counts.dagname or "")  # type: ignore[misc]
        self._identity = identity
        if st.st_size == self.offset:
            return False
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            while True:
                block = handle.read(READ_BLOCK)
                if not block:
                    break
                self.offset += len(block)
                data = self._partial + block
                cut = data.rfind(b"\n") + 1
                self._partial = data[cut:]
                for raw in data[:cut].split(b"\n")[:-1]:
                    self.lines += 1
                    self._line(raw.decode("utf-8", "replace"))
        return True

    def _line(self, line: str) -> None:
        match progress(line):
            case DagStatus(status):
                self._dag_status = status
            case NodesTotal(total):
                self._total = total
            case NodeCounts(done, pre, queued, post, ready, unready, failed):
                if self._total is None:
                    return  # a table without its `Of N nodes total` line: nothing to divide by
                c = self.counts
                c.succeeded, c.pre, c.queued, c.post = done, pre, queued, post
                c.ready, c.unready, c.failed, c.total = ready, unready, failed, self._total
                if self._dag_status:
                    c.state = FAILURE
                else:
                    c.state = SUCCESS if c.percent_done == 100.0 else RUNNING
            case Finished(rc):
                self.counts.state = FAILURE if rc else SUCCESS


class SubmitDirProgress:
    """All DAGs of a submit directory: the root DAG and its sub-workflows."""

    def __init__(self, submit_dir: str | os.PathLike[str]) -> None:
        self.submit_dir = str(Path(submit_dir).resolve())
        self.dags: dict[str, DagmanProgress] = {}
        self.files: list[str] = []

    def poll(self, rescan: bool = True) -> bool:
        """Find new dagman.out files (when `rescan`) and read what every one gained."""
        changed = False
        if rescan or not self.files:
            found = find_dagmans(self.submit_dir)
            if found != self.files:
                self.files = found
                changed = True
        for path in self.files:
            key, name = self._names(path)
            progress = self.dags.get(path)
            if progress is None:
                progress = self.dags[path] = DagmanProgress(path, key, name)
            changed |= progress.poll()
        return changed

    def _names(self, path: str) -> tuple[str, str]:
        base = dag_base(path)
        if os.path.dirname(path) == self.submit_dir:
            return "root", f"{base}.dag"
        return base, f"{base}.dag"

    def counts(self) -> dict[str, DagCounts]:
        """DAG key -> counts, as pegasus-status's `dags` (a later DAG of the same name wins)."""
        out: dict[str, DagCounts] = {}
        if self.files:
            out["root"] = DagCounts()
        for path in self.files:
            progress = self.dags.get(path)
            if progress is not None:
                out[progress.key] = progress.counts
        if self.files and "root" in out and out["root"].dagname is None:
            del out["root"]  # no dagman.out in the submit dir itself
        return out

    def relative(self, path: str) -> str:
        return os.path.relpath(os.path.dirname(path), self.submit_dir)

    @property
    def finished(self) -> bool:
        """The root DAG reached Success or Failure (pegasus-status --watch stops there)."""
        root = self.counts().get("root")
        return root is not None and root.state != RUNNING
