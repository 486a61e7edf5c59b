"""Kickstart records (YAML as Pegasus 5 writes them, XML as Pegasus 4 did).

Only the keys monitord reads need to be right, but we write the same layout as the
real records so parsers are exercised on realistic text (multipart sections included).
"""

from __future__ import annotations

import time
from dataclasses import dataclass


def iso(ts: float, ms: bool = True) -> str:
    """Local ISO 8601 with offset, the way kickstart prints times."""
    lt = time.gmtime(ts)
    off = time.strftime("%z", lt)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", lt)
    frac = f".{int((ts % 1) * 1000):03d}" if ms else ""
    return f"{base}{frac}{off[:3]}:{off[3:]}"


@dataclass
class Record:
    """What one kickstart invocation reports."""

    xform: str
    task_id: str
    site: str
    label: str
    start: float
    duration: float
    exitcode: int
    executable: str
    argv: list[str]
    hostname: str
    hostaddr: str
    user: str
    cwd: str
    condor_id: str
    output_lfn: str | None = None
    sha256: str = "0" * 64
    size: int = 0
    stderr_text: str = ""


def yaml_record(r: Record) -> str:
    """One `- invocation:` document in the kickstart 3.0 YAML layout."""
    utime, stime = round(r.duration * 0.3, 3), round(r.duration * 0.1, 3)
    lines = [
        "- invocation: True", "  version: 3.0", f"  start: {iso(r.start - 0.09)}",
        f"  duration: {r.duration + 0.094:.3f}", f'  transformation: "{r.xform}"',
        f'  derivation: "{r.task_id}"', f'  resource: "{r.site}"', f'  wf-label: "{r.label}"',
        f'  wf-stamp: "{iso(r.start - 3600, ms=False)}"', "  interface: eth0",
        f"  hostaddr: {r.hostaddr}", f"  hostname: {r.hostname}", "  pid: 4242", "  uid: 1000",
        f"  user: {r.user}", "  gid: 1000", "  group: synth", "  umask: 0o0022", "  mainjob:",
        f"    start: {iso(r.start)}", f"    duration: {r.duration:.3f}", "    pid: 4243", "    usage:",
        f"      utime: {utime}", f"      stime: {stime}", "      maxrss: 2980", "      minflt: 150",
        "      majflt: 0", "      nswap: 0", "      inblock: 0", "      outblock: 8",
        "      msgsnd: 0", "      msgrcv: 0", "      nsignals: 0", "      nvcsw: 4", "      nivcsw: 0",
        "    status:", f"      raw: {r.exitcode << 8}", f"      regular_exitcode: {r.exitcode}",
        "    executable:", f"      file_name: {r.executable}", "      mode: 0o100755",
        "      size: 143232", "    argument_vector:", *[f'      - "{a}"' for a in r.argv],
        "    procs:", "  jobids:", f"    condor: {r.condor_id}", f"  cwd: {r.cwd}", "  usage:",
        "    utime: 0.016", "    stime: 0.066", "    maxrss: 2544", "  machine:",
        "    page-size: 4096", "    uname_system: linux", f"    uname_nodename: {r.hostname}",
        "    uname_release: 5.14.0-synth.x86_64", "    uname_machine: x86_64",
        "    ram_total: 65653728", "    ram_free: 21190060", "    cpu_count: 24",
        "    cpu_speed: 2500", "    cpu_vendor: GenuineIntel", "    cpu_model: Synthetic CPU @ 2.00GHz",
        "    load_min1: 0.72", "    load_min5: 0.53", "    load_min15: 0.43", "  files:",
    ]
    if r.output_lfn:
        lines += [f"    {r.output_lfn}:", f'      lfn: "{r.output_lfn}"',
                  f"      file_name: {r.cwd}/{r.output_lfn}", "      mode: 0o100644",
                  f"      size: {r.size}", f"      ctime: {iso(r.start + r.duration, ms=False)}",
                  f"      user: {r.user}", "      output: True", f"      sha256: {r.sha256}",
                  "      checksum_timing: 0.00"]
    lines += ["    stdin:", "      file_name: /dev/null", "      size: 0",
              "    stdout:", f"      temporary_name: {r.cwd}/ks.out.synth", "      size: 0",
              "    stderr:", f"      temporary_name: {r.cwd}/ks.err.synth", "      size: 0"]
    return "\n".join(lines) + "\n"


def multipart_integrity(lfns: list[str], seed_hex: str) -> str:
    """The pegasus-multipart trailer PegasusLite appends after integrity checks."""
    out = ["---------------pegasus-multipart", "- integrity_verification_attempts:"]
    for lfn in lfns:
        out += [f'  - lfn: "{lfn}"', f'    pfn: "{lfn}"', f"    sha256: {seed_hex}", "    success: True"]
    out += ["- integrity_summary:", f"    succeeded: {len(lfns)}", "    failed: 0", "    duration: 0.043"]
    return "\n".join(out) + "\n"


def cluster_task_line(n: int, r: Record) -> str:
    """pegasus-cluster's per-task progress line."""
    return (f'[cluster-task id={n}, start="{iso(r.start)}", duration={r.duration:.3f}, '
            f'status={r.exitcode}, line={n}, pid={4300 + n}, app="{r.executable}"]\n')


def cluster_summary_line(records: list[Record]) -> str:
    """pegasus-cluster's final summary line."""
    failed = sum(1 for r in records if r.exitcode)
    dur = records[-1].start + records[-1].duration - records[0].start
    return (f'[cluster-summary stat="{"fail" if failed else "ok"}", lines={len(records)}, '
            f"tasks={len(records)}, succeeded={len(records) - failed}, failed={failed}, extra=0, "
            f'duration={dur:.3f}, start="{iso(records[0].start)}", pid=4299, app="pegasus-cluster"]\n')


def xml_record(r: Record) -> str:
    """A Pegasus 4 kickstart XML invocation (schema 2.x layout)."""
    end = r.start + r.duration
    args = "".join(f"<arg nr=\"{i}\">{a}</arg>" for i, a in enumerate(r.argv, 1))
    out_stat = ""
    if r.output_lfn:
        out_stat = (f'  <statcall error="0" id="final" lfn="{r.output_lfn}">\n'
                    f'    <file name="{r.cwd}/{r.output_lfn}"/>\n'
                    f'    <statinfo mode="0100644" size="{r.size}" inode="1" nlink="1" blksize="4096" '
                    f'blocks="8" mtime="{iso(end)}" atime="{iso(end)}" ctime="{iso(end)}" uid="1000" '
                    f'user="{r.user}" gid="1000" group="synth"/>\n'
                    f'    <checksum type="sha256" value="{r.sha256}"/>\n  </statcall>\n')
    return (
        '<?xml version="1.0" encoding="ISO-8859-1"?>\n'
        '<invocation xmlns="http://pegasus.isi.edu/schema/invocation" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://pegasus.isi.edu/schema/invocation '
        'http://pegasus.isi.edu/schema/iv-2.2.xsd" version="2.2" '
        f'start="{iso(r.start - 0.09)}" duration="{r.duration + 0.094:.3f}" '
        f'transformation="{r.xform}" derivation="{r.task_id}" resource="{r.site}" '
        f'wf-label="{r.label}" wf-stamp="{iso(r.start - 3600, ms=False)}" interface="eth0" '
        f'hostaddr="{r.hostaddr}" hostname="{r.hostname}" pid="4242" uid="1000" user="{r.user}" '
        'gid="1000" group="synth" umask="0022">\n'
        f'  <mainjob start="{iso(r.start)}" duration="{r.duration:.3f}" pid="4243">\n'
        f'    <usage utime="{r.duration * 0.3:.3f}" stime="{r.duration * 0.1:.3f}" maxrss="2980" '
        'minflt="150" majflt="0" nswap="0" inblock="0" outblock="8" msgsnd="0" msgrcv="0" '
        'nsignals="0" nvcsw="4" nivcsw="0"/>\n'
        f'    <status raw="{r.exitcode << 8}"><regular exitcode="{r.exitcode}"/></status>\n'
        f'    <statcall error="0">\n      <file name="{r.executable}"/>\n'
        '      <statinfo mode="0100755" size="143232" inode="2" nlink="1" blksize="4096" '
        'blocks="280" uid="0" user="root" gid="0" group="root"/>\n    </statcall>\n'
        f"    <argument-vector>{args}</argument-vector>\n  </mainjob>\n"
        f"  <cwd>{r.cwd}</cwd>\n"
        '  <usage utime="0.016" stime="0.066" maxrss="2544" minflt="131" majflt="0" nswap="0" '
        'inblock="0" outblock="0" msgsnd="0" msgrcv="0" nsignals="0" nvcsw="2" nivcsw="6"/>\n'
        f'  <machine page-size="4096">\n    <stamp>{iso(r.start)}</stamp>\n'
        f'    <uname system="linux" nodename="{r.hostname}" release="3.10.0-synth" machine="x86_64"/>\n'
        '    <linux>\n      <ram total="65653728" free="21190060" shared="0" buffer="10616"/>\n'
        '      <swap total="20971516" free="18799792"/>\n'
        '      <cpu count="24" speed="2500" vendor="GenuineIntel">Synthetic CPU @ 2.00GHz</cpu>\n'
        '      <load min1="0.72" min5="0.53" min15="0.43"/>\n    </linux>\n  </machine>\n'
        '  <statcall error="0" id="stdin">\n    <file name="/dev/null"/>\n'
        '    <statinfo mode="020666" size="0" inode="3" nlink="1" blksize="4096" blocks="0" '
        'uid="0" user="root" gid="0" group="root"/>\n  </statcall>\n'
        '  <statcall error="0" id="stdout">\n    <temporary name="/tmp/ks.out.synth" descriptor="3"/>\n'
        '    <statinfo mode="0100600" size="0" inode="4" nlink="1" blksize="4096" blocks="0" '
        f'uid="1000" user="{r.user}" gid="1000" group="synth"/>\n  </statcall>\n'
        '  <statcall error="0" id="stderr">\n    <temporary name="/tmp/ks.err.synth" descriptor="4"/>\n'
        '    <statinfo mode="0100600" size="0" inode="5" nlink="1" blksize="4096" blocks="0" '
        f'uid="1000" user="{r.user}" gid="1000" group="synth"/>\n  </statcall>\n'
        f"{out_stat}</invocation>\n"
    )
