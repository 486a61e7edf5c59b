"""The one home of the default Stampede database's name: monitord's
`sqlite:///<directory>/<dag basename>.stampede.db`."""

from __future__ import annotations

import os


def dag_stem(dag: str) -> str:
    """`diamond-0.dag` (or a path to it) -> `diamond-0`."""
    return os.path.splitext(os.path.basename(dag))[0]


def stampede_db_path(directory: str | os.PathLike[str], stem: str) -> str:
    """`<directory>/<stem>.stampede.db`."""
    return os.path.join(os.fspath(directory), f"{stem}.stampede.db")


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The `sqlite:` URL of a database file (3 slashes then the path: relative or absolute)."""
    return "sqlite:///" + os.fspath(path)


def default_db_url(directory: str | os.PathLike[str], dag: str) -> str:
    """monitord's default database of a workflow whose .dag file is `dag`, in `directory`."""
    return sqlite_url(stampede_db_path(directory, dag_stem(dag)))


def workflow_db_url(directory: str | os.PathLike[str], dagman_out: str | os.PathLike[str], dag: str | None) -> str:
    """The default database of the workflow whose DAGMan log is `dagman_out`: named for its .dag file (`dag`,
    as braindump records it), else for the log (`<name>.dagman.out`)."""
    return default_db_url(directory, dag or os.path.basename(dagman_out).removesuffix(".dagman.out"))
