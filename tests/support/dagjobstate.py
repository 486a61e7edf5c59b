"""A plain HTCondor DAG (no Pegasus) with the jobstate.log DAGMan writes for it.

`write_plain_dag(dir)` writes `plain.dag` (JOBSTATE_LOG, JOB, SCRIPT PRE/POST,
RETRY, PARENT/CHILD), one submit file per node, and `plain.jobstate.log` with
every kind of line DAGMan writes (seed 001): DAGMan start/finish, recovery
started/finished/failure, a restart without a finish, pre/post scripts with
success and failure, a held/released job, an eviction, a submit failure, a
retry with a new sequence number, an abort, and node events with no Stampede
counterpart (JOB_SUSPENDED). `LINES` is the log as (offset seconds, text).
"""

from __future__ import annotations

from pathlib import Path

T0 = 1700000000

DAG = """\
# a plain DAGMan workflow, no Pegasus
JOBSTATE_LOG plain.jobstate.log
JOB A a.sub
JOB B b.sub
JOB C c.sub
JOB D d.sub
SCRIPT PRE A pre.sh A
SCRIPT POST A post.sh A
SCRIPT PRE D pre.sh D
RETRY B 2
RETRY C 3
PARENT A CHILD B C
PARENT B C CHILD D
"""

SUBMIT = """\
universe = vanilla
executable = /bin/{exe}
arguments = "-c {node}"
log = plain.log
queue
"""

# (seconds after T0, line text without the timestamp)
LINES: list[tuple[int, str]] = [
    (0, "INTERNAL *** DAGMAN_STARTED 100.0 ***"),
    (2, "A PRE_SCRIPT_STARTED - local - 1"),
    (3, "A PRE_SCRIPT_SUCCESS - local - 1"),
    (5, "A SUBMIT 101.0 local - 1"),
    (6, "A EXECUTE 101.0 local - 1"),
    (7, "A IMAGE_SIZE 101.0 local - 1"),
    (10, "A JOB_TERMINATED 101.0 local - 1"),
    (10, "A JOB_SUCCESS 0 local - 1"),
    (10, "A POST_SCRIPT_STARTED 101.0 local - 1"),
    (12, "A POST_SCRIPT_TERMINATED 101.0 local - 1"),
    (12, "A POST_SCRIPT_SUCCESS 101.0 local - 1"),
    (14, "B SUBMIT 102.0 - - 2"),
    (14, "C SUBMIT_FAILURE - - - 3"),
    (15, "B EXECUTE 102.0 - - 2"),
    (16, "B JOB_HELD 102.0 - - 2"),
    (18, "B JOB_RELEASED 102.0 - - 2"),
    (19, "B JOB_EVICTED 102.0 - - 2"),
    (20, "C SUBMIT 103.0 - - 3"),
    (21, "C EXECUTE 103.0 - - 3"),
    (22, "C JOB_SUSPENDED 103.0 - - 3"),
    (23, "C JOB_UNSUSPENDED 103.0 - - 3"),
    (25, "B JOB_TERMINATED 102.0 - - 2"),
    (25, "B JOB_FAILURE 1 - - 2"),
    (26, "B SUBMIT 104.0 - - 4"),
    (27, "B EXECUTE 104.0 - - 4"),
    (30, "C JOB_TERMINATED 103.0 - - 3"),
    (30, "C JOB_FAILURE 2 - - 3"),
    (31, "B JOB_TERMINATED 104.0 - - 4"),
    (31, "B JOB_SUCCESS 0 - - 4"),
    (40, "INTERNAL *** DAGMAN_FINISHED 1 ***"),
    # rescue run: recovery, C retried, D's PRE script fails once
    (100, "INTERNAL *** DAGMAN_STARTED 200.0 ***"),
    (100, "INTERNAL *** RECOVERY_STARTED ***"),
    (101, "INTERNAL *** RECOVERY_FINISHED ***"),
    (102, "C SUBMIT 201.0 - - 5"),
    (103, "C EXECUTE 201.0 - - 5"),
    (108, "C JOB_TERMINATED 201.0 - - 5"),
    (108, "C JOB_SUCCESS 0 - - 5"),
    (110, "D PRE_SCRIPT_STARTED - - - 6"),
    (111, "D PRE_SCRIPT_FAILURE - - - 6"),
    # DAGMan killed: it starts again without a DAGMAN_FINISHED, recovery fails
    (200, "INTERNAL *** DAGMAN_STARTED 300.0 ***"),
    (200, "INTERNAL *** RECOVERY_STARTED ***"),
    (201, "INTERNAL *** RECOVERY_FAILURE ***"),
    (202, "D PRE_SCRIPT_STARTED - - - 7"),
    (203, "D PRE_SCRIPT_SUCCESS - - - 7"),
    (204, "D SUBMIT 301.0 - - 7"),
    (205, "D EXECUTE 301.0 - - 7"),
    (206, "D JOB_ABORTED 301.0 - - 7"),
    (206, "D JOB_FAILURE -1 - - 7"),
    (210, "INTERNAL *** DAGMAN_FINISHED 2 ***"),
]


def log_text(lines: list[tuple[int, str]] | None = None, t0: int = T0) -> str:
    return "".join(f"{t0 + offset} {text}\n" for offset, text in (lines if lines is not None else LINES))


def write_plain_dag(directory: str | Path, *, with_log: bool = True) -> Path:
    """Write the DAG, its submit files and (unless `with_log` is False) its jobstate.log; return the log's path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "plain.dag").write_text(DAG)
    for node, exe in (("A", "true"), ("B", "sleep"), ("C", "false"), ("D", "echo")):
        (directory / f"{node.lower()}.sub").write_text(SUBMIT.format(exe=exe, node=node))
    path = directory / "plain.jobstate.log"
    if with_log:
        path.write_text(log_text())
    return path


def _stamp(ts: int) -> str:
    import time

    return time.strftime("%m/%d/%y %H:%M:%S", time.gmtime(ts))


# The first DAGMan run of the same DAG as HTCondor 10 writes it in plain.dag.dagman.out (times in UTC):
# A with PRE and POST scripts, B failing (status 1) then retried with success, C failing (status 2).
DAGMAN_OUT: list[tuple[int, str]] = [
    (0, "******************************************************"),
    (0, "** condor_scheduniv_exec.100.0 (CONDOR_DAGMAN) STARTING UP"),
    (0, "** $CondorVersion: 10.2.5 2023-02-27 BuildID: 631644 PackageID: 10.2.5-1 $"),
    (0, "** PID = 4242"),
    (0, "******************************************************"),
    (0, "DAG Input file is plain.dag"),
    (0, "Parsing 1 dagfiles"),
    (0, "Parsing plain.dag ..."),
    (0, "Dag contains 4 total jobs"),
    (2, "Running PRE script of Node A..."),
    (3, "PRE Script of node A completed successfully."),
    (5, "Submitting HTCondor Node A job(s)..."),
    (5, "\tassigned HTCondor ID (101.0.0)"),
    (6, "Event: ULOG_SUBMIT for HTCondor Node A (101.0.0) {%s}" % _stamp(T0 + 5)),
    (6, "Event: ULOG_EXECUTE for HTCondor Node A (101.0.0) {%s}" % _stamp(T0 + 6)),
    (11, "Event: ULOG_JOB_TERMINATED for HTCondor Node A (101.0.0) {%s}" % _stamp(T0 + 10)),
    (11, "Node A job proc (101.0.0) completed successfully."),
    (11, "Running POST script of Node A..."),
    (12, "Event: ULOG_POST_SCRIPT_TERMINATED for HTCondor Node A (101.0.0) {%s}" % _stamp(T0 + 12)),
    (12, "POST Script of node A completed successfully."),
    (14, "Submitting HTCondor Node B job(s)..."),
    (14, "\tassigned HTCondor ID (102.0.0)"),
    (14, "Submitting HTCondor Node C job(s)..."),
    (14, "\tassigned HTCondor ID (103.0.0)"),
    (15, "Event: ULOG_SUBMIT for HTCondor Node B (102.0.0) {%s}" % _stamp(T0 + 14)),
    (15, "Event: ULOG_SUBMIT for HTCondor Node C (103.0.0) {%s}" % _stamp(T0 + 14)),
    (15, "Event: ULOG_EXECUTE for HTCondor Node B (102.0.0) {%s}" % _stamp(T0 + 15)),
    (21, "Event: ULOG_EXECUTE for HTCondor Node C (103.0.0) {%s}" % _stamp(T0 + 21)),
    (25, "Event: ULOG_JOB_TERMINATED for HTCondor Node B (102.0.0) {%s}" % _stamp(T0 + 25)),
    (25, "Node B job proc (102.0.0) failed with status 1."),
    (25, "Retrying node B (retry #1 of 2)..."),
    (26, "Submitting HTCondor Node B job(s)..."),
    (26, "\tassigned HTCondor ID (104.0.0)"),
    (27, "Event: ULOG_SUBMIT for HTCondor Node B (104.0.0) {%s}" % _stamp(T0 + 26)),
    (27, "Event: ULOG_EXECUTE for HTCondor Node B (104.0.0) {%s}" % _stamp(T0 + 27)),
    (30, "Event: ULOG_JOB_TERMINATED for HTCondor Node C (103.0.0) {%s}" % _stamp(T0 + 30)),
    (30, "Node C job proc (103.0.0) failed with status 2."),
    (31, "Event: ULOG_JOB_TERMINATED for HTCondor Node B (104.0.0) {%s}" % _stamp(T0 + 31)),
    (31, "Node B job proc (104.0.0) completed successfully."),
    (40, "**** condor_scheduniv_exec.100.0 (condor_DAGMAN) pid 4242 EXITING WITH STATUS 1"),
]


def write_plain_dagman_out(directory: str | Path) -> Path:
    """The DAG of `write_plain_dag` (no jobstate.log) with its first run's dagman.out; returns its path."""
    directory = Path(directory)
    write_plain_dag(directory, with_log=False)
    path = directory / "plain.dag.dagman.out"
    path.write_text("".join(f"{_stamp(T0 + offset)} {text}\n" for offset, text in DAGMAN_OUT))
    return path
