"""The synthetic submit-directory generator: determinism, structure, scenarios, sizing."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from streamer.synth import SCENARIOS, generate, iter_dagman_chunks, split_chunks
from tests.support.expected import EXPECTED_COUNTS, JOBS, SEED
from tests.support.validate import count_bp, run_monitord
from tests.conftest import unavailable

TS = re.compile(r"^(\d{2})/(\d{2})/(\d{2}) (\d{2}):(\d{2}):(\d{2}) (.*)$")
# The line patterns monitord recognises (reference notes, section 2).
ULOG = re.compile(r"Event:\s+ULOG_(\S+) for (?:HT|)Condor (?:Job|Node) (\S+)\s+\((-?[0-9]+\.[0-9]+)(\.[0-9]+)?\)")
SUBMITTING = re.compile(r"Submitting (?:HT|)Condor Node (.+) job")
SCRIPT_RUN = re.compile(r"Running (PRE|POST) script of (?:Job|Node) (.+)\.{3}")
SCRIPT_END = re.compile(r"(PRE|POST) Script of (?:Job|[nN]ode) (\S+) (completed successfully\.|failed with status\s+-?\d+)$")
JOB_END = re.compile(r"Node (\S+) job proc \(([0-9.]+)\) (completed successfully\.|failed with status -?\d+\.)$")
EXITING = re.compile(r"\(condor_DAGMAN\)[\w\s]+EXITING WITH STATUS (\d+)$")
PARSING = re.compile(r"Parsing (.+) \.\.\.$")


def tree(root: Path) -> dict[str, bytes | str]:
    """Relative path -> content (or link target) of every file under root."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "->" + os.readlink(p)
        elif p.is_file():
            out[rel] = p.read_bytes()
    return out


def body(path: Path) -> list[str]:
    """Message part of every dagman.out line; fails on a line without DAGMan's timestamp."""
    msgs = []
    for line in path.read_text().splitlines():
        m = TS.match(line)
        assert m, f"no timestamp: {line!r}"
        msgs.append(m.group(7))
    return msgs


def dag_nodes(d: Path) -> set[str]:
    dag = next(d.glob("*.dag"))
    return {ln.split()[1] for ln in dag.read_text().splitlines() if ln.startswith("JOB ")}


def load_kickstart_yaml(text: str) -> list[dict]:
    """Invocation records of a .out: drop multipart trailer and pegasus-cluster lines."""
    text = text.split("---------------pegasus-multipart")[0]
    docs = "\n".join(ln for ln in text.splitlines() if not ln.startswith("[cluster-"))
    return yaml.load(docs, Loader=yaml.CSafeLoader) or []


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = generate(tmp_path / "a", jobs=7, scenario="retry,held,hierarchical", seed=3)
    b = generate(tmp_path / "b", jobs=7, scenario="retry,held,hierarchical", seed=3)
    assert tree(a) == tree(b)


def test_seed_changes_uuid_and_times(tmp_path: Path) -> None:
    a = yaml.safe_load((generate(tmp_path / "a", jobs=2, seed=1) / "braindump.yml").read_text())
    b = yaml.safe_load((generate(tmp_path / "b", jobs=2, seed=2) / "braindump.yml").read_text())
    assert a["wf_uuid"] != b["wf_uuid"]
    assert a["timestamp"] != b["timestamp"]
    assert a["wf_uuid"] == a["root_wf_uuid"]


def test_unknown_scenario_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        generate(tmp_path / "x", scenario="success,helld")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_structure(tmp_path: Path, scenario: str) -> None:
    d = generate(tmp_path / scenario, jobs=4, scenario=scenario)
    bd = yaml.safe_load((d / "braindump.yml").read_text())
    assert bd["dag"] == "synth-0.dag" and bd["jsd"] == "jobstate.log"
    for name in ("synth-0.dag", "synth-0.dag.condor.sub", "synth-0.static.bp", "synth-0.dag.dagman.out",
                 "workflow.yml", "synth-0.notify"):
        assert (d / name).is_file(), name
    nodes = dag_nodes(d)
    assert len(nodes) == 4 + 5
    for n in nodes:
        sub = (d / "00" / "00" / f"{n}.sub").read_text()
        assert f'+pegasus_wf_dag_job_id = "{n}"' in sub
        assert f'+pegasus_wf_uuid = "{bd["wf_uuid"]}"' in sub
    msgs = body(d / "synth-0.dag.dagman.out")
    for m in msgs:
        for pat in (ULOG, SUBMITTING, SCRIPT_RUN, SCRIPT_END, JOB_END):
            hit = pat.search(m)
            if hit:
                assert hit.group(2 if pat in (ULOG, SCRIPT_RUN, SCRIPT_END) else 1) in nodes, m
    assert sum(1 for m in msgs if EXITING.search(m)) == (2 if scenario == "rescue" else 1)
    for out in (d / "00" / "00").glob("*.out.*"):
        text = out.read_text()
        if text.startswith("<?xml"):
            root = ET.fromstring(text.split("\n", 1)[1])
            assert root.tag.endswith("invocation")
        elif text:
            recs = load_kickstart_yaml(text)
            assert recs and all(r["invocation"] is True for r in recs)
            assert all(r["mainjob"]["status"]["raw"] in (0, 256) for r in recs)


def ulog(d: Path, kind: str) -> list[str]:
    return [m for m in body(next(d.glob("*.dag.dagman.out"))) if f"ULOG_{kind} " in m]


def test_success_all_jobs_terminate_once(tmp_path: Path) -> None:
    d = generate(tmp_path / "s", jobs=5)
    assert len(ulog(d, "JOB_TERMINATED")) == 10
    assert len(ulog(d, "POST_SCRIPT_TERMINATED")) == 10
    msgs = body(d / "synth-0.dag.dagman.out")
    assert msgs[-1].endswith("EXITING WITH STATUS 0")
    assert "All jobs Completed!" in msgs


def test_retry_writes_two_attempts(tmp_path: Path) -> None:
    d = generate(tmp_path / "r", jobs=3, scenario="retry")
    job = "findrange_ID0000001"
    assert (d / f"00/00/{job}.out.000").exists() and (d / f"00/00/{job}.out.001").exists()
    first = load_kickstart_yaml((d / f"00/00/{job}.out.000").read_text())[0]
    second = load_kickstart_yaml((d / f"00/00/{job}.out.001").read_text())[0]
    assert (first["mainjob"]["status"]["raw"], second["mainjob"]["status"]["raw"]) == (256, 0)
    assert "PegasusLite: exitcode 1" in (d / f"00/00/{job}.err.000").read_text()
    msgs = body(d / "synth-0.dag.dagman.out")
    assert f"Retrying node {job} (retry #1 of 1)..." in msgs
    assert sum(1 for m in msgs if m.startswith(f"Submitting HTCondor Node {job} ")) == 2


def test_held_and_released(tmp_path: Path) -> None:
    d = generate(tmp_path / "h", jobs=3, scenario="held")
    assert len(ulog(d, "JOB_HELD")) == 1 and len(ulog(d, "JOB_RELEASED")) == 1
    msgs = body(d / "synth-0.dag.dagman.out")
    held = next(i for i, m in enumerate(msgs) if "ULOG_JOB_HELD" in m)
    assert msgs[held + 1].startswith("  Hold reason: ")


def test_held_abort_fails_dag(tmp_path: Path) -> None:
    d = generate(tmp_path / "ha", jobs=3, scenario="held_abort")
    assert len(ulog(d, "JOB_ABORTED")) == 1
    assert body(d / "synth-0.dag.dagman.out")[-1].endswith("EXITING WITH STATUS 1")
    assert (d / "synth-0.dag.rescue001").exists()


def test_rescue_second_run(tmp_path: Path) -> None:
    d = generate(tmp_path / "rs", jobs=3, scenario="rescue")
    msgs = body(d / "synth-0.dag.dagman.out")
    assert [m for m in msgs if PARSING.search(m)] == ["Parsing synth-0.dag ..."] * 2
    assert [EXITING.search(m).group(1) for m in msgs if EXITING.search(m)] == ["1", "0"]
    assert "USING RESCUE DAG synth-0.dag.rescue001" in msgs
    rescue = (d / "synth-0.dag.rescue001").read_text()
    assert "DONE create_dir_synth_0_local" in rescue and "DONE findrange_ID0000001" not in rescue


def test_submit_failure_line(tmp_path: Path) -> None:
    d = generate(tmp_path / "sf", jobs=2, scenario="submit_failure")
    msgs = body(d / "synth-0.dag.dagman.out")
    i = msgs.index("ERROR: submit attempt failed")
    assert SUBMITTING.search(msgs[i - 2]).group(1) == "findrange_ID0000001"


def test_pre_failure_then_success(tmp_path: Path) -> None:
    d = generate(tmp_path / "pf", jobs=2, scenario="pre_failure")
    msgs = body(d / "synth-0.dag.dagman.out")
    assert "PRE Script of node findrange_ID0000001 failed with status 1" in msgs
    assert "PRE Script of node findrange_ID0000001 completed successfully." in msgs
    assert "SCRIPT PRE findrange_ID0000001 " in (d / "synth-0.dag").read_text()


def test_evicted_reexecutes(tmp_path: Path) -> None:
    d = generate(tmp_path / "ev", jobs=2, scenario="evicted")
    assert len(ulog(d, "JOB_EVICTED")) == 1
    assert len(ulog(d, "EXECUTE")) == 7 + 1  # 7 nodes, one executes twice


def test_clustered_records(tmp_path: Path) -> None:
    d = generate(tmp_path / "c", jobs=2, scenario="clustered")
    text = (d / "00/00/findrange_ID0000001.out.000").read_text()
    assert len(load_kickstart_yaml(text)) == 3
    assert text.count("[cluster-task ") == 3 and text.count("[cluster-summary ") == 1


def test_xml_kickstart(tmp_path: Path) -> None:
    d = generate(tmp_path / "x", jobs=2, scenario="xml_kickstart")
    text = (d / "00/00/findrange_ID0000001.out.000").read_text()
    assert text.startswith('<?xml version="1.0" encoding="ISO-8859-1"?>')
    root = ET.fromstring(text.split("\n", 1)[1])
    ns = "{http://pegasus.isi.edu/schema/invocation}"
    assert root.get("transformation") == "findrange"
    assert root.find(f"{ns}mainjob/{ns}status").get("raw") == "0"


def test_hierarchical_layout(tmp_path: Path) -> None:
    d = generate(tmp_path / "hw", jobs=2, scenario="hierarchical")
    sub = d / "00/00/inner_subworkflow.000"
    assert os.readlink(d / "00/00/inner_subworkflow") == "inner_subworkflow.000"
    inner = yaml.safe_load((sub / "braindump.yml").read_text())
    outer = yaml.safe_load((d / "braindump.yml").read_text())
    assert inner["root_wf_uuid"] == outer["wf_uuid"] != inner["wf_uuid"]
    assert inner["dag"] == "inner.dag" and (sub / "inner.dag.dagman.out").exists()
    subfile = (d / "00/00/pegasus-plan_inner_subworkflow.sub").read_text()
    assert f"_CONDOR_DAGMAN_LOG={outer['submit_dir']}/00/00/./inner_subworkflow/inner.dag.dagman.out" in subfile
    # the inner DAGMan runs while the outer job executes
    outer_msgs = body(d / "synth-0.dag.dagman.out")
    assert any("ULOG_EXECUTE for HTCondor Node pegasus-plan_inner_subworkflow" in m for m in outer_msgs)


@pytest.mark.parametrize("jobs", [1, 2500])
def test_sizing(tmp_path: Path, jobs: int) -> None:
    d = generate(tmp_path / "n", jobs=jobs)
    chunks = -(-jobs // 1000)
    nodes = dag_nodes(d)
    assert len(nodes) == jobs + 3 + 2 * chunks
    assert len([n for n in nodes if "_ID" in n]) == jobs
    assert f"Dag contains {len(nodes)} total jobs" in body(d / "synth-0.dag.dagman.out")
    assert len(ulog(d, "JOB_TERMINATED")) == len(nodes)


def test_live_chunks_rebuild_the_log(tmp_path: Path) -> None:
    d = generate(tmp_path / "l", jobs=3)
    log = d / "synth-0.dag.dagman.out"
    original = log.read_text()
    chunks = list(iter_dagman_chunks(d, pieces=25, seed=4))
    assert log.read_text() == ""
    assert len(chunks) == 25 and "".join(chunks) == original
    assert any(not c.endswith("\n") for c in chunks[:-1])
    assert split_chunks("abc", pieces=10) == ["a", "b", "c"]


@pytest.mark.parametrize("scenario", sorted(EXPECTED_COUNTS))
def test_real_monitord_counts(tmp_path: Path, scenario: str) -> None:
    """The recorded expectations still hold for the real monitord (pegasus-wms, a test dependency)."""
    if importlib.util.find_spec("Pegasus") is None:
        unavailable("pegasus-wms (the reference monitord) is not installed")
    d = generate(tmp_path / scenario, jobs=JOBS, scenario=scenario, seed=SEED)
    proc = run_monitord(sys.executable, d, tmp_path / "out.bp", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert count_bp(tmp_path / "out.bp") == EXPECTED_COUNTS[scenario]


# Lines of scenarios the corpus has no example of; their text follows HTCondor 10's messages.
NOT_IN_CORPUS = {
    "Hold reason:", "ERROR: submit attempt failed", "Event: ULOG_JOB_EVICTED ", "Event: ULOG_JOB_RELEASED ",
    "Found rescue DAG number", "Job submit try ", "PRE Script of node NODE failed with status",
    "USING RESCUE DAG", "~~~~~~~~",
}


def shape(msg: str, nodes: set[str]) -> str:
    """A dagman.out message with node names, paths, event times and numbers abstracted."""
    msg = re.sub(r"\{[^}]*\}", "{T}", msg)
    for n in sorted(nodes, key=len, reverse=True):
        msg = msg.replace(n, "NODE")
    msg = re.sub(r"/\S+", "PATH", msg)
    msg = re.sub(r"\d+", "N", msg)
    return re.sub(r"\S+\.dag\b", "DAG", msg)


def shapes(root: Path) -> set[str]:
    out = set()
    for dag in root.rglob("*.dag"):
        nodes = {ln.split()[1] for ln in dag.read_text().splitlines() if ln.startswith("JOB ")}
        for log in dag.parent.glob("*.dagman.out"):
            out |= {shape(m, nodes) for m in body(log)}
    return out


def test_dagman_lines_have_the_corpus_format(tmp_path: Path, corpus: Path) -> None:
    """Every generated line has the shape of a line real DAGMan 10 wrote (or is a known extra)."""
    real = set().union(*(shapes(d) for d in (corpus / "pegasus").iterdir()))
    ours = set().union(*(shapes(generate(tmp_path / s, jobs=3, scenario=s)) for s in SCENARIOS))
    extra = {s for s in ours - real if not any(s.lstrip().startswith(k) for k in NOT_IN_CORPUS)}
    assert extra == set()
    assert len(ours & real) > 40


def test_refuses_non_empty_dir(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("x")
    with pytest.raises(FileExistsError):
        generate(tmp_path, jobs=1)
