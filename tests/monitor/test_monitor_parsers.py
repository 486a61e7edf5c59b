"""The monitor's input parsers: dagman.out lines, braindump, static.bp, .sub, kickstart, jobstate.log."""

from __future__ import annotations

import calendar
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.monitor.parsers import braindump, dagman, jobstate, kickstart, staticbp, submitfile
from tests.support.examples import examples


# ---------------------------------------------------------------- dagman.out

@pytest.mark.parametrize("line, kind", [
    ("03/03/23 22:23:49 Event: ULOG_SUBMIT for HTCondor Node create_dir_x (2.0.0) {03/03/23 22:23:44}",
     dagman.Event("SUBMIT", "create_dir_x", "2.0")),
    ("03/03/23 22:23:49 Event: ULOG_EXECUTE for Condor Job ls_ID1 (17.0) {03/03/23 22:23:48}",
     dagman.Event("EXECUTE", "ls_ID1", "17.0")),
    ("03/03/23 22:23:44 Submitting HTCondor Node create_dir_x job(s)...", dagman.DagmanSubmit("create_dir_x")),
    ("03/03/23 22:23:44 ERROR: submit attempt failed", dagman.SubmitFailed()),
    ("03/03/23 22:23:54 Running POST script of Node create_dir_x...", dagman.ScriptStarted("POST", "create_dir_x")),
    ("03/03/23 22:23:54 Running PRE script of Node plan_x...", dagman.ScriptStarted("PRE", "plan_x")),
    ("03/03/23 22:23:59 POST Script of node create_dir_x completed successfully.",
     dagman.ScriptDone("POST", "create_dir_x", 0)),
    ("03/03/23 22:23:59 POST Script of Node ls_ID1 failed with status 1", dagman.ScriptDone("POST", "ls_ID1", 1)),
    ("03/03/23 22:23:59 PRE Script of Node plan_x failed with status -1.", dagman.ScriptDone("PRE", "plan_x", -1)),
    ("03/03/23 22:23:54 Node ls_ID1 job proc (3.0.0) failed with status 1.", dagman.JobFailure("ls_ID1", "3.0.0", 1)),
    ("03/03/23 22:23:54 Node ls_ID1 job proc (3.0.0) failed with signal 9.", dagman.JobFailure("ls_ID1", "3.0.0", 9)),
    ("03/03/23 22:23:54 Node ls_ID1 job proc (3.0.0) completed successfully.", dagman.JobSuccess("ls_ID1", "3.0.0")),
    ("03/03/23 22:25:00 **** condor_scheduniv_exec.1.0 (condor_DAGMAN) pid 132896 EXITING WITH STATUS 0",
     dagman.Finished(0)),
    ("03/03/23 22:23:43 ** condor_scheduniv_exec.1.0 (CONDOR_DAGMAN) STARTING UP", dagman.CondorId("1.0")),
    ("03/03/23 22:23:43 ** PID = 132896", dagman.Pid(132896)),
    ("03/03/23 22:23:43 Parsing process-0.dag ...", dagman.DagStart("process-0.dag")),
    ("03/03/23 22:23:43 ** $CondorVersion: 10.2.5 2023-02-27 BuildID: 631644 $", dagman.Version(10, 2, 5)),
    ("03/03/23 22:23:43 Running in RECOVERY mode... >>>>>>>>>>", dagman.RecoveryStart()),
    ("03/03/23 22:23:59 POST Script of Node ls_ID1 was skipped", dagman.ScriptDone("POST", "ls_ID1", None)),
    ("03/03/23 22:23:43 ...done with RECOVERY mode <<<<<<<<<<", dagman.RecoveryEnd()),
    ("03/03/23 22:23:43 Received SIGUSR1", dagman.Aborted()),
    ("03/03/23 22:30:01 Hold reason: Error from slot1: out of disk",
     dagman.HeldReason(" Error from slot1: out of disk")),
    ("03/03/23 22:23:43 Dag contains 5 total jobs", dagman.Other()),
    ("03/03/23 22:23:49 Event: ULOG_SUBMIT for HTCondor Node creat", dagman.Other()),  # truncated line
])
def test_classify(line: str, kind: dagman.Kind) -> None:
    got = dagman.classify(line)
    assert type(got) is type(kind) and got == kind  # NamedTuples: equal tuples of two kinds are not the same


@pytest.mark.parametrize("line, kind", [
    ("11/14/23 22:13:20 DAG status: 0 (DAG_STATUS_OK)", dagman.DagStatus(0)),
    ("11/14/23 22:13:20 DAG status: 2 (DAG_STATUS_NODE_FAILED)", dagman.DagStatus(2)),
    ("11/14/23 22:13:20 Of 8 nodes total:", dagman.NodesTotal(8)),
    ("11/14/23 22:13:20     3       0        2       0       0          3        0        0",
     dagman.NodeCounts(3, 0, 2, 0, 0, 3, 0)),
    ("11/14/23 22:13:20 (D_ALWAYS) Of 8 nodes total:", dagman.NodesTotal(8)),  # HTCondor's debug category
    ("11/14/23 22:13:20 (D_ALWAYS)     3       0        2       0       0          3        0        0",
     dagman.NodeCounts(3, 0, 2, 0, 0, 3, 0)),
    ("11/14/23 22:14:20 **** condor_scheduniv_exec.1.0 (condor_DAGMAN) pid 7 EXITING WITH STATUS 2\r",
     dagman.Finished(2)),
    ("11/14/23 22:13:20  Done     Pre   Queued    Post   Ready   Un-Ready   Failed   Futile", None),
    ("11/14/23 22:13:20 Dag contains 5 total jobs", None),
    ("     3       0        2       0       0          3        0        0", None),  # no stamp: no table row
    ("EXITING WITH STATUS 0", None),  # not DAGMan's exit line (no stamp, no condor_DAGMAN)
    ("11/14/23 22:13:20 Node x: EXITING WITH STATUS 0", None),
])
def test_progress(line: str, kind: dagman.Progress | None) -> None:
    """The node table as pegasus-status reads it, and DAGMan's exit as the monitor reads it."""
    got = dagman.progress(line)
    assert type(got) is type(kind) and got == kind


def test_timestamp_zones_and_ulog_time() -> None:
    utc = dagman.LineParser("UTC")
    line = "03/03/23 22:23:49 Event: ULOG_SUBMIT for HTCondor Node a (2.0.0) {03/03/23 22:23:44}"
    assert utc.timestamp(line) == calendar.timegm((2023, 3, 3, 22, 23, 44))  # the event time wins
    pacific = dagman.LineParser("America/Los_Angeles")
    assert pacific.timestamp("03/03/23 22:23:43 x") == calendar.timegm((2023, 3, 4, 6, 23, 43))
    assert utc.timestamp("no time here") is None
    assert utc.timestamp("2023-03-04T06:23:43Z something") == calendar.timegm((2023, 3, 4, 6, 23, 43))
    assert utc.timestamp("2023-03-03 22:23:43-0800 x") == calendar.timegm((2023, 3, 4, 6, 23, 43))


def _last_stamp(parser: dagman.LineParser, line: str) -> float | None:
    """The definition: the last of all DAGMan stamps on the line (findall's last), None without one."""
    found = dagman.RE_TS.findall(line)
    return parser._epoch(found[-1]) + parser.adjust if found else None


_STAMP_PARTS = st.sampled_from(["11/14/23 22:13:20", "1/2 3:04:05", "12/31/99 23:59:59", "/", " ", "x", "7",
                                "11/14/23", "22:13:20", "1/2/3 4:05:06", "{", "(14.0.0)", "/a/b"])


@settings(max_examples=300)
@given(st.lists(_STAMP_PARTS, max_size=8), st.integers(min_value=-7200, max_value=7200))
def test_timestamp_is_the_last_dagman_stamp(parts: list[str], adjust: int) -> None:
    """The start-of-line shortcut (a stamp and no `/` after it) gives what findall's last stamp gives."""
    line = "".join(parts)
    parser = dagman.LineParser("UTC", adjust)
    try:
        expected = _last_stamp(parser, line)
    except (ValueError, OverflowError):
        with pytest.raises(dagman.BadTime):
            parser.timestamp(line)
        return
    if expected is None:
        assert parser.timestamp(line) is None
    else:
        assert parser.timestamp(line) == expected
    assert parser.timestamp("11/14/23 22:13:20 a /b 1/2 3:04:05") == parser._epoch(("1", "2", "", "3", "04", "05")) + adjust
    assert parser.timestamp("11/14/23 22:13:20 Event: x") == parser._epoch(("11", "14", "23", "22", "13", "20")) + adjust


def test_parse_skips_lines_without_timestamp() -> None:
    parser = dagman.LineParser("UTC")
    assert parser.parse("\tassigned HTCondor ID (2.0.0)") is None
    parsed = parser.parse("03/03/23 22:23:43 Parsing process-0.dag ...\n")
    assert (parsed.kind, parsed.ts) == (dagman.DagStart("process-0.dag"), 1677882223)


# ---------------------------------------------------------------- braindump, static.bp

def test_braindump_yaml_and_legacy_text(tmp_path: Path) -> None:
    (tmp_path / "braindump.txt").write_text("wf_uuid abc-1\ndag x-0.dag\nsubmit_dir /a/./b//c\n# note\n")
    assert braindump.load(tmp_path) == {"wf_uuid": "abc-1", "dag": "x-0.dag", "submit_dir": "/a/b/c"}
    (tmp_path / "braindump.yml").write_text('wf_uuid: "abc-2"\ndag: y-0.dag\ndax_index: 0\ngrid_dn: null\n')
    assert braindump.load(tmp_path) == {"wf_uuid": "abc-2", "dag": "y-0.dag", "dax_index": "0", "grid_dn": None}


def test_braindump_missing_or_bad(tmp_path: Path) -> None:
    with pytest.raises(braindump.BraindumpError):
        braindump.load(tmp_path)
    (tmp_path / "braindump.yml").write_text("- just\n- a list\n")
    with pytest.raises(braindump.BraindumpError):
        braindump.load(tmp_path)


def test_static_bp_line() -> None:
    name, fields = staticbp.parse_line(
        'ts=1970-02-06T22:59:29.144084Z event=task.info xwf.id=u task.id="ID1" type="1" argv="-l /"')
    assert name == "task.info"
    assert fields == {"ts": 3193169, "xwf.id": "u", "task.id": "ID1", "type": "1", "argv": "-l /"}
    assert staticbp.parse_line("") is None
    assert staticbp.parse_line('ts=1 xwf.id="unterminated') is None
    assert staticbp.parse_line("ts=1 xwf.id=u") is None  # no event


# ---------------------------------------------------------------- .sub

SUB = """\
environment = "LANG=C _CONDOR_DAGMAN_LOG=/orig/run/00/00/sub.000/inner.dag.dagman.out X=1"
error = /orig/run//00/00/ls.err
executable = /orig/run/00/00/ls.sh
arguments = "-n pegasus::x -l /"
input = /orig/run/00/00/ls.in
output = /orig/run//00/00/ls.out
globusrsl = (maxwalltime=20)(max_time=30)
+pegasus_wf_xformation = "ls"
+pegasus_wf_dax_job_id = "ID0000001"
+pegasus_job_class = 1
+pegasus_site = "condorpool"
+pegasus_cores = 4
+pegasus_gpus = 1
"""


def test_submit_file() -> None:
    info = submitfile.parse(SUB, want_environment=True)
    assert (info.site, info.transformation, info.derivation, info.cores, info.job_class) == (
        "condorpool", "ls", "ID0000001", 4, "1")
    assert (info.executable, info.arguments) == ("/orig/run/00/00/ls.sh", "-n pegasus::x -l /")
    assert (info.input, info.output, info.error) == ("/orig/run/00/00/ls.in", "/orig/run/00/00/ls.out",
                                                    "/orig/run/00/00/ls.err")
    assert info.dagman_out == "/orig/run/00/00/sub.000/inner.dag.dagman.out"
    assert info.max_minutes == 30
    assert submitfile.parse(SUB).dagman_out is None  # only pegasus-plan/subdax jobs look at it


def test_environment_old_form() -> None:
    assert submitfile.dagman_log_from_environment("A=1;_CONDOR_DAGMAN_LOG=/x/y.dagman.out;B=2") == "/x/y.dagman.out"
    assert submitfile.dagman_log_from_environment('"A=1 B=2"') is None


def test_missing_submit_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert submitfile.read(str(tmp_path / "nope.sub")) is None
    assert "cannot read submit file" in caplog.text


# ---------------------------------------------------------------- kickstart

YAML_RECORD = """\
- invocation: True
  start: 2023-03-03T22:24:20.615-08:00
  transformation: "ls"
  derivation: "ID0000001"
  resource: "condorpool"
  hostaddr: 128.9.46.53
  hostname: workflow.isi.edu
  user: mzalam
  mainjob:
    start: 2023-03-03T22:24:20.709-08:00
    duration: 0.005
    usage:
      utime: 0.001
      stime: 0.004
      maxrss: 2980
    status:
      raw: 0
      regular_exitcode: 0
    executable:
      file_name: /usr/bin/ls
  cwd: /scratch/dir
  machine:
    ram_total: 65653728
    uname_system: linux
    uname_release: "4.18"
    uname_machine: x86_64
    cpu_count: 24
  files:
    listing.txt:
      lfn: "listing.txt"
      size: 1780
      output: True
      sha256: abc
      checksum_timing: 0.01
    input.txt:
      size: 1048576
    stdout:
      data: |
        hello
        @@@MONITORING_PAYLOAD - START@@@{"monitoring_event": "metadata", "payload": [{"name": "n", "value": 3}]}@@@MONITORING_PAYLOAD - END@@@
"""


def test_yaml_record() -> None:
    (record,) = kickstart.parse(YAML_RECORD)
    assert record["start"] == "2023-03-03T22:24:20.709-08:00"  # timestamps stay text
    assert kickstart.epochdate(record["start"]) == calendar.timegm((2023, 3, 4, 6, 24, 20))
    expected = {
        "invocation": True, "hostname": "workflow.isi.edu", "resource": "condorpool", "user": "mzalam",
        "hostaddr": "128.9.46.53", "transformation": "ls", "derivation": "ID0000001", "duration": 0.005,
        "utime": 0.001, "stime": 0.004, "maxrss": 2980, "ram": 65653728, "system": "linux", "release": "4.18",
        "machine": "x86_64", "cpu_count": 24, "name": "/usr/bin/ls", "raw": 0, "exitcode": 0, "cwd": "/scratch/dir",
        "tot_ip_size_mb": 1.0, "tot_op_size_mb": 0.001698,
        "outputs": {"listing.txt": {"size": "1780", "checksum.type": "sha256", "checksum.value": "abc",
                                    "checksum.timing": "0.01"}},
    }
    stdout = record.pop("stdout")
    record.pop("start")
    assert record == expected
    split = kickstart.split_monitoring(stdout)
    assert split.text == "hello\n\n"
    assert split.events == [{"monitoring_event": "metadata", "payload": [{"name": "n", "value": 3}]}]


def test_clustered_file_with_multipart() -> None:
    text = (YAML_RECORD + "[cluster-task id=1, start=\"2023-03-03T22:24:20.000-08:00\", duration=0.5, status=0]\n"
            + YAML_RECORD.replace('"ls"', '"cat"')
            + "[cluster-task id=2, start=\"2023-03-03T22:24:21.000-08:00\", duration=0.7, status=0]\n"
            + "---------------pegasus-multipart\n- integrity_summary:\n    succeeded: 2\n    failed: 1\n    duration: 0.3\n"
            + "[cluster-summary stat=\"ok\", lines=4, tasks=2, succeeded=2, failed=0, extra=0, "
              "start=\"2023-03-03T22:24:19.000-08:00\", duration=2.5, pid=1, app=\"x\"]\n")
    records = kickstart.parse(text)
    assert [sorted(k for k in r if k in ("invocation", "task", "multipart", "clustered")) for r in records] == [
        ["invocation"], ["task"], ["invocation"], ["task"], ["multipart"], ["clustered"]]
    assert [r.get("transformation") for r in records if "invocation" in r] == ["ls", "cat"]
    assert records[1]["id"] == "1" and records[3]["duration"] == "0.7"
    assert records[4]["integrity_summary"] == {"succeeded": 2, "failed": 1, "duration": 0.3}
    assert records[5]["duration"] == "2.5" and records[5]["start"] == "2023-03-03T22:24:19.000-08:00"


def test_truncated_or_garbage_yaml_gives_no_records(caplog: pytest.LogCaptureFixture) -> None:
    assert kickstart.parse(YAML_RECORD[:200] + "  mainjob: [unclosed\n", "x.out.000") == []
    assert "x.out.000: unreadable YAML invocation record" in caplog.text
    assert kickstart.parse("\x00\x01 not kickstart at all\n") == []
    assert kickstart.parse("") == []


XML_RECORD = """<?xml version="1.0" encoding="ISO-8859-1"?>
<invocation xmlns="http://pegasus.isi.edu/schema/invocation" version="2.1" start="2012-01-01T10:00:00.000-08:00"
 duration="2.000" transformation="diamond::preprocess:4.0" derivation="ID000001" resource="local"
 hostaddr="10.0.0.1" hostname="node1" user="alice">
  <mainjob start="2012-01-01T10:00:00.500-08:00" duration="1.500">
    <usage utime="0.100" stime="0.200" maxrss="1024"/>
    <status raw="256"><regular exitcode="1"/></status>
    <statcall error="0"><file name="/bin/preprocess">7F454C46</file></statcall>
    <argument-vector><arg nr="1">-a</arg><arg nr="2">x</arg></argument-vector>
  </mainjob>
  <cwd>/work/dir</cwd>
  <statcall error="0" id="stdout"><file name="/tmp/out"/><data>hi there</data></statcall>
  <machine page-size="4096"><stamp>2012</stamp><uname system="linux" release="2.6" machine="x86_64">x</uname>
    <linux><ram total="2048"/><cpu count="4" speed="2000" vendor="Intel">Xeon</cpu></linux></machine>
</invocation>
"""


def test_xml_record() -> None:
    """monitord's XML reading: attribute values stay text, usage numbers are floats, cpu is a dict."""
    (record,) = kickstart.parse(XML_RECORD)
    assert record == {
        "invocation": True, "hostname": "node1", "resource": "local", "user": "alice", "hostaddr": "10.0.0.1",
        "transformation": "diamond::preprocess:4.0", "derivation": "ID000001", "duration": "1.500",
        "start": "2012-01-01T10:00:00.500-08:00", "utime": 0.1, "stime": 0.2, "maxrss": 1024.0, "raw": "256",
        "exitcode": "1", "name": "/bin/preprocess", "system": "linux", "release": "2.6", "machine": "x86_64",
        "total": "2048", "cpu": {"cpu_count": "4", "cpu_speed": "2000", "cpu_vendor": "Intel", "cpu_model": "Xeon"},
        "cwd": "/work/dir", "argument-vector": "-a x", "stdout": "hi there", "stderr": "", "outputs": {},
    }
    assert kickstart.parse(XML_RECORD[:300] + "</invocation>") == []  # broken XML: no records


def test_xml_output_file_metadata() -> None:
    record = XML_RECORD.replace("</invocation>", """<statcall error="0" id="final" lfn="f.out">
    <file name="/work/dir/f.out"/><statinfo mode="0100644" size="17" ctime="2012-01-01T10:00:02-08:00" user="alice"/>
    <checksum type="sha256" value="abc"/></statcall></invocation>""")
    (parsed,) = kickstart.parse(record)
    assert parsed["outputs"] == {"f.out": {"size": "17", "ctime": "2012-01-01T10:00:02-08:00", "user": "alice",
                                           "checksum.type": "sha256", "checksum.value": "abc"}}


def test_quote_matches_monitord() -> None:
    assert kickstart.quote("a b\n'%\"é") == "a b%0A%27%25%22%C3%A9"
    assert kickstart.quote("plain text") == "plain text"


def _quote_bytewise(text: str) -> str:
    """monitord's rule as it reads, byte by byte (what `quote` does by runs)."""
    return "".join(f"%{b:02X}" if b < 0x20 or b >= 0x7F or b in b"%'\"" else chr(b)
                   for b in text.encode("utf-8", errors="replace"))


@given(st.text(alphabet=st.characters(), max_size=60)
       | st.lists(st.sampled_from(["a", " ", "\n", "\t", "%", "'", '"', "\x7f", "é", "\ud800", "\U0001f600", "~"]),
                  max_size=30).map("".join))
@settings(max_examples=examples(400), deadline=None)
def test_quote_is_the_bytewise_rule(text: str) -> None:
    assert kickstart.quote(text) == _quote_bytewise(text)


# ---------------------------------------------------------------- jobstate.log

def test_jobstate_lines_and_reader(tmp_path: Path) -> None:
    assert jobstate.state_line(1677882224.0, "a", "SUBMIT", None, "2.0", "local", None, 1) == \
        "1677882224 a SUBMIT 2.0 local - 1\n"
    assert jobstate.state_line(1677882234, "a", "JOB_SUCCESS", 0, "2.0", None, 600, 1) == \
        "1677882234 a JOB_SUCCESS 0 - 600 1\n"
    path = tmp_path / "jobstate.log"
    writer = jobstate.JobstateWriter(path)
    writer.write(jobstate.internal_line(1, "DAGMAN_STARTED 1.0"))
    writer.write(jobstate.state_line(2, "a", "EXECUTE", None, "2.0", "local", None, 1))
    assert writer.flush() == path.stat().st_size
    writer.close()
    entries = list(jobstate.read(path))
    assert entries == [jobstate.JobstateEntry(1, "INTERNAL", "DAGMAN_STARTED", "1.0"),
                       jobstate.JobstateEntry(2, "a", "EXECUTE", "2.0", "local", "-", "1")]
    again = jobstate.JobstateWriter(path, truncate_at=len("1 INTERNAL *** DAGMAN_STARTED 1.0 ***\n"))
    again.close()
    assert path.read_text() == "1 INTERNAL *** DAGMAN_STARTED 1.0 ***\n"
    rotated = jobstate.JobstateWriter(path, rotate=True)
    rotated.close()
    assert path.read_text() == "" and (tmp_path / "jobstate.log.000").is_file()


def test_epochdate_counts_as_datetime_does() -> None:
    """The integer count of `epochdate` gives what datetime gives (`_epochdate_datetime`), refusals included."""
    import random

    rng = random.Random(28)
    texts = [f"{y:04d}-{mo:02d}-{d:02d}T{rng.randrange(25):02d}:{rng.randrange(61):02d}:{rng.randrange(61):02d}"
             f"{rng.choice(['', '.5', ',123456'])}{rng.choice(['Z', 'z', '+00:00', '-05:30', '+1400', '-99:59'])}"
             for y in (1, 2, 1900, 1969, 1970, 2000, 2023, 2024, 2100, 9998, 9999)
             for mo in range(0, 14) for d in (0, 1, 28, 29, 30, 31, 32)]
    texts += [f"{y}-{mo:02d}-{d:02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
              f"{rng.choice(['Z', '+02:00', '-0800'])}"
              for y in (1900, 2000, 2023, 2024) for mo in range(1, 13) for d in range(1, 32)]  # every day
    texts += ["20230304T062420Z", "2023-03-04 06:24:20+01:00", "x 2023-03-04T06:24:20-0000 y"]
    checked = 0
    for text in texts:
        match = kickstart.RE_ISO.search(text)
        assert match is not None, text
        try:
            expected = kickstart._epochdate_datetime(match)
        except OverflowError:  # an offset past year 9999 or before year 1: datetime's own error, as before
            continue
        assert kickstart.epochdate(text) == expected, text
        checked += expected is not None
    assert checked > 1900
