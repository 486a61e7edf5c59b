"""Issue 5 end to end: `streamer replay DIR --dest sqlite:... --dest postgresql:...` on every corpus dir.

Both databases must hold the rows of monitord's golden database (auto ids and
wall-clock columns aside, compared through natural keys), and Pegasus's own
tools must print the same on streamer's replay output as on the golden DB.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import dbcompare
from tests.endpoints.test_db import assert_same, golden_snapshot
from tests.endpoints.test_db_tools import _assert_same_outputs, _copy_submit_dir, _dag_name, _run_tools
from tests.support.pghelp import pg_snapshot
from tests.support.commands import replay

NAMES = ("process_wf_success", "process_wf_failure", "sample_wf_held", "hierarchical_wf_success")

pytestmark = pytest.mark.corpus


def without_total_memory(snapshot: dbcompare.Snapshot) -> dbcompare.Snapshot:
    """host.total_memory blanked, after checking streamer filled it.

    monitord's kickstart parser drops the host's memory (it reads the key
    `total`, which its YAML reader renames `ram`), so the golden rows have NULL
    there; streamer stores the value the record carries (documented extra).
    """
    hosts = snapshot["host"]
    assert hosts and all(row[-1] and row[-1] > 0 for row in hosts), "streamer should fill host.total_memory"
    blanked = type(hosts)()
    for row, count in hosts.items():
        blanked[row[:-1] + (None,)] += count
    return {**snapshot, "host": blanked}


@pytest.mark.parametrize("name", NAMES)
async def test_replay_into_sqlite_and_postgres_equals_monitord(tmp_path: Path, corpus: Path, golden: Path,
                                                               pg_db: str, name: str) -> None:  # noqa: F811
    submit = _copy_submit_dir(corpus, name, tmp_path, monitord_state=False)
    db = tmp_path / "x.db"
    replay(submit, f"sqlite:///{db}", pg_db)
    expected = golden_snapshot(golden, name)
    assert_same(without_total_memory(dbcompare.sqlite_snapshot(str(db))), expected)
    assert_same(without_total_memory(await pg_snapshot(pg_db)), expected)


@pytest.mark.parametrize("name", ("process_wf_failure", "hierarchical_wf_success"))
def test_pegasus_tools_read_the_default_database_of_a_replay(tmp_path: Path, corpus: Path, golden: Path,
                                                             name: str) -> None:
    ours = _copy_submit_dir(corpus, name, tmp_path / "ours", monitord_state=False)
    replay(ours)  # no --dest: <dag>.stampede.db next to the workflow, plus monitord.started/done
    db_name = _dag_name(ours).removesuffix(".dag") + ".stampede.db"
    assert (ours / db_name).is_file()
    assert (ours / "monitord.started").read_text().startswith("pid ")
    assert len((ours / "monitord.done").read_text().split()) == 2
    theirs = _copy_submit_dir(corpus, name, tmp_path / "monitord")
    shutil.copy(golden / f"{name}.stampede.db", theirs / db_name)
    _assert_same_outputs(_run_tools(tmp_path / "ours", name), _run_tools(tmp_path / "monitord", name))
