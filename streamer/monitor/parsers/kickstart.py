"""Kickstart records (`<job>.out[.NNN]`) -> monitord's flat invocation records.

A kickstart file holds one record per task: YAML (Pegasus 5: `- invocation:`)
or XML (Pegasus 4: `<invocation ...>`), with clustered-job lines
(`[cluster-task ...]`, `[cluster-summary ...]`, their old `seqexec` names) and
`---------------pegasus-multipart` YAML blocks (integrity, transfer attempts,
location) between them. Each record becomes a flat dict with monitord's key
names (`transformation`, `start`, `duration`, `utime`, `raw`, `name`, ...),
which the workflow engine turns into `inv.*`, `host.info`, `rc.meta`,
`int.metric` events and the composite event.

Parsing is pure (text in, records out) so the engine can run it in a worker
thread: a large clustered job's YAML must not stall the event loop.
"""

from __future__ import annotations

import calendar
import json
import logging
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import yaml

from streamer.monitor.parsers import yamlguard, yamlsub
from streamer.monitor.parsers.kickstart_xml import from_xml

log = logging.getLogger(__name__)

MULTIPART_MARKER = "---------------pegasus-multipart"
MONITORING_START = "@@@MONITORING_PAYLOAD - START@@@"
MONITORING_END = "@@@MONITORING_PAYLOAD - END@@@"
RE_PROPS = re.compile(r'(?<![^\s,\[])([^\s=,\[]+)\s*=\s*([^",]+)')
RE_QUOTED_PROPS = re.compile(r'(?<![^\s,\[])([^\s=,\[]+)\s*=\s*"([^"]+)"')
"""`key=value` and `key="value"` of PMC's task and summary lines; a key starts after a blank, `,` or `[`
and holds none of them, so each character is looked at a bounded number of times (found with findall)."""
RE_ISO = re.compile(
    r"(\d{4})-?(\d{2})-?(\d{2})[ tT]?(\d{2}):?(\d{2}):?(\d{2})([.,]\d+)?([zZ]|[-+](\d{2}):?(\d{2}))"
)


_MONTH_DAYS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def epochdate(text: Any) -> int | None:
    """ISO-8601 text with a zone -> whole epoch seconds (fraction dropped, as monitord).

    Counted in integers (days from the civil date); the years next to datetime's range (1, 9999), where an
    offset may leave it, go through `datetime` as before (`_epochdate_datetime`, the definition).
    """
    if not isinstance(text, str):
        return None
    m = RE_ISO.search(text)
    if m is None:
        return None
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    hour, minute, second = int(m.group(4)), int(m.group(5)), int(m.group(6))
    if not 2 <= year <= 9998:
        return _epochdate_datetime(m)
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not (1 <= month <= 12 and 1 <= day <= (29 if month == 2 and leap else _MONTH_DAYS[month])
            and hour < 24 and minute < 60 and second < 60):
        return None  # what datetime() refuses
    # days since 1970-01-01 (H. Hinnant's days_from_civil)
    y = year - 1 if month <= 2 else year
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    epoch = days * 86400 + hour * 3600 + minute * 60 + second
    tz = m.group(8)
    if tz == "Z" or tz == "z":
        return epoch
    offset = int(m.group(9)) * 3600 + int(m.group(10)) * 60
    return epoch + offset if tz[0] == "-" else epoch - offset


def _epochdate_datetime(m: re.Match[str]) -> int | None:
    """`epochdate` of a RE_ISO match through datetime (what the integer count is checked against)."""
    try:
        year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
        moment = datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None
    tz = m.group(8)
    if tz.upper() != "Z":
        offset = timedelta(hours=int(m.group(9)), minutes=int(m.group(10)))
        moment = moment + offset if tz[0] == "-" else moment - offset
    return calendar.timegm(moment.timetuple())


def quote(text: str) -> str:
    """monitord's URL quoting: control and non-ASCII bytes, `%`, `'` and `"` as %XX.

    The text's UTF-8 bytes (`errors="replace"`: a lone surrogate is `?`), each byte below 0x20, from
    0x7F, or one of `%'"` written %XX, the others as they are. Only the runs of such characters are
    encoded byte by byte (a job's output is mostly plain text between line breaks).
    """
    if text.isascii() and text.isprintable() and not any(c in text for c in "%'\""):
        return text
    return _QUOTED.sub(_quote_run, text)


_QUOTE_BYTE = [f"%{byte:02X}" if byte < 0x20 or byte >= 0x7F or byte in (0x25, 0x27, 0x22) else chr(byte)
               for byte in range(256)]
_QUOTED = re.compile("[\x00-\x1f\x7f-\U0010ffff%'\"]+")


def _quote_run(match: re.Match[str]) -> str:
    return "".join([_QUOTE_BYTE[byte] for byte in match.group().encode("utf-8", errors="replace")])


@dataclass
class TaskOutput:
    """A task's stdout/stderr split into the user's text and embedded monitoring payloads."""

    text: str
    events: list[dict[str, Any]] = field(default_factory=list)


def split_monitoring(text: str) -> TaskOutput:
    """Strip `@@@MONITORING_PAYLOAD - START@@@{json}@@@...END@@@` blocks out of `text`."""
    start = text.find(MONITORING_START)
    if start == -1:
        return TaskOutput(text)
    parts: list[str] = []
    events: list[dict[str, Any]] = []
    end = 0
    while start != -1:
        parts.append(text[end:start])
        stop = text.find(MONITORING_END, start)
        if stop == -1:  # unterminated payload: keep the rest as user text
            parts.append(text[start:])
            return TaskOutput("".join(parts), events)
        payload = text[start + len(MONITORING_START):stop]
        try:
            events.append(json.loads(payload))
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python recurses
            log.warning("unreadable monitoring payload %.80r", payload)
        end = stop + len(MONITORING_END)
        start = text.find(MONITORING_START, end)
    parts.append(text[end:])
    return TaskOutput("".join(parts), events)


# ---------------------------------------------------------------- splitting a file into records

def split_records(text: str) -> list[tuple[str, str]]:
    """(kind, text) chunks: `invocation`, `xml`, `task`, `summary`, `multipart`."""
    simple = _split_simple(text)
    return simple if simple is not None else _split_lines(text)


_ODD_LINE = re.compile(r"\n[^ \-l\n]")
"""A line that starts with none of ` `, `-`, `l` (after the first line: see _has_odd_line)."""


def _has_odd_line(text: str) -> bool:
    # the first line by hand, the others by a search for their line break: far faster than `^` with re.M,
    # which the regex engine tries at every character
    return text[:1] not in " -l\n" or _ODD_LINE.search(text) is not None


def _split_simple(text: str) -> list[tuple[str, str]] | None:
    """The common file, one YAML record and at most one multipart block, cut without a line loop.

    None for anything else (clustered, XML, several records, stray lines), which
    `_split_lines` handles; both give the same chunks where this one answers.
    """
    if not text.startswith("- invocation:") or text.find("- invocation:", 1) != -1:
        return None
    if "[cluster-" in text or "[seqexec-" in text or "<invocation" in text:
        return None
    marker = text.find(MULTIPART_MARKER)
    if marker == -1:
        body, rest = text, None
    else:
        if text[marker - 1] != "\n" or text.find(MULTIPART_MARKER, marker + 1) != -1:
            return None
        body = text[:marker]
        end = text.find("\n", marker)
        rest = text[end + 1:] if end != -1 else ""
    if _has_odd_line(body) or (rest and _has_odd_line(rest)):
        return None
    chunks = [("invocation", body)]
    if rest is not None:
        chunks.append(("multipart", rest))
    return chunks


def _split_lines(text: str) -> list[tuple[str, str]]:
    chunks: list[tuple[str, str]] = []
    kind: str | None = None
    buffer: list[str] = []

    def close() -> None:
        nonlocal kind, buffer
        if kind is not None:
            chunks.append((kind, "".join(buffer)))
        kind, buffer = None, []

    for line in text.splitlines(keepends=True):
        if kind == "xml":
            buffer.append(line)
            if "</invocation>" in line:
                close()
            continue
        single = _single_line_kind(line)
        if single is not None:
            close()
            start = line.find("[")
            end = line.find("]", start)
            if end >= 0:
                chunks.append((single, line[start:end + 1]))
            else:
                log.warning("malformed %s line ignored", single)
            continue
        if line.startswith(MULTIPART_MARKER):
            close()
            kind = "multipart"
            continue
        if "- invocation:" in line and (kind != "multipart" or line.startswith("- invocation:")):
            close()
            kind = "invocation"
            buffer = [line[line.find("- invocation:"):]]
            continue
        if "<invocation" in line:
            close()
            kind = "xml"
            buffer = [line[line.find("<invocation"):]]
            if "</invocation>" in line:
                close()
            continue
        if kind is not None and line[:1] in (" ", "-", "l", "\n"):
            buffer.append(line)
    close()
    return chunks


def _single_line_kind(line: str) -> str | None:
    if "[cluster-summary" in line or "[seqexec-summary" in line:
        return "summary"
    if "[cluster-task" in line or "[seqexec-task" in line:
        return "task"
    return None


# ---------------------------------------------------------------- YAML records

# What monitord reads from a YAML record, by indentation path (True: the whole subtree).
_KEEP: dict[str, Any] = {
    "invocation": True, "hostname": True, "resource": True, "user": True, "hostaddr": True,
    "transformation": True, "derivation": True, "cwd": True,
    "mainjob": {"start": True, "duration": True, "status": True,
                "usage": {"utime": True, "stime": True, "maxrss": True},
                "executable": {"file_name": True}},
    "machine": {k: True for k in ("ram_total", "uname_system", "uname_release", "uname_machine",
                                  "cpu_count", "cpu_speed", "cpu_vendor", "cpu_model", "cpu_name")},
    "files": {"*": {k: True for k in ("size", "output", "user", "ctime", "sha256", "checksum_timing", "data")}},
}


def _yaml_scalar(text: str) -> Any:
    return _pyyaml(text)


def _pyyaml(text: str) -> Any:
    """PyYAML's reading of `text`, once its nesting is known to be bounded (its C loader recurses in C)."""
    return yamlguard.load(text)


def _load_subset(chunk: str, keep: Any) -> Any:
    """The record by the fast kickstart-subset loader, or None when PyYAML must read it."""
    try:
        return yamlsub.load(chunk, keep, _yaml_scalar)
    except (yamlsub.Unsupported, yaml.YAMLError):
        return None


def _load_invocation(chunk: str) -> Any:
    data = _load_subset(chunk, _KEEP)
    if data is not None:
        return data
    return _pyyaml(chunk)  # outside the kickstart subset: PyYAML reads the whole record


# ---------------------------------------------------------------- record parsers

def parse(text: str, where: str = "kickstart", problems: list[str] | None = None) -> list[dict[str, Any]]:
    """All records of a kickstart file. An unreadable invocation record empties the list (as monitord).

    What is left out is said as `WHERE: what and why`: appended to `problems` when given (the engine
    names the job and counts it), else logged as a warning.
    """
    said: list[str] = [] if problems is None else problems
    try:
        return _parse(text, where, said)
    finally:
        if problems is None:
            for problem in said:
                log.warning("%s", problem)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


def _parse(text: str, where: str, problems: list[str]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for number, (kind, chunk) in enumerate(split_records(text), 1):
        if kind == "invocation":
            try:
                data = _load_invocation(chunk)
                entry = data[0] if isinstance(data, list) and data else {}
                if not isinstance(entry, dict):
                    raise ValueError("invocation record is not a mapping")
            except (yaml.YAMLError, ValueError, TypeError, IndexError) as exc:
                problems.append(f"{where}: unreadable YAML invocation record (record {number}: {_first_line(exc)}); "
                                "records ignored")
                return []
            records.append(from_yaml(entry))
        elif kind == "xml":
            try:
                records.append(from_xml(chunk))
            except ET.ParseError as error:  # not `exc`: compiled code keeps one type per name
                problems.append(f"{where}: unreadable XML invocation record ({error}); records ignored")
                return []
        elif kind in ("task", "summary"):
            record: dict[str, Any] = {"task" if kind == "task" else "clustered": True}
            for key, value in RE_QUOTED_PROPS.findall(chunk):
                record[key] = value
            for key, value in RE_PROPS.findall(chunk):
                record[key] = value
            records.append(record)
        elif kind == "multipart":
            records.extend(_multipart(chunk, f"{where}: record {number}", problems))
    return records


def _multipart(chunk: str, where: str, problems: list[str]) -> list[dict[str, Any]]:
    try:
        entries = _load_subset(chunk, True)
        if entries is None:
            entries = _pyyaml(chunk)
    except (yaml.YAMLError, yamlguard.Refused) as exc:
        problems.append(f"{where}: unreadable multipart record ignored ({_first_line(exc)})")
        return []
    if entries is None:
        return []
    if isinstance(entries, dict):
        entries = [entries]
    out = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            entry["multipart"] = True
            out.append(entry)
    return out


_YAML_MAP = (
    (("hostname",), "hostname"),
    (("resource",), "resource"),
    (("user",), "user"),
    (("hostaddr",), "hostaddr"),
    (("transformation",), "transformation"),
    (("derivation",), "derivation"),
    (("mainjob", "duration"), "duration"),
    (("mainjob", "start"), "start"),
    (("mainjob", "usage", "utime"), "utime"),
    (("mainjob", "usage", "stime"), "stime"),
    (("mainjob", "usage", "maxrss"), "maxrss"),
    (("machine", "ram_total"), "ram"),
    (("machine", "uname_system"), "system"),
    (("machine", "uname_release"), "release"),
    (("machine", "uname_machine"), "machine"),
    (("machine", "cpu_count"), "cpu_count"),
    (("machine", "cpu_speed"), "cpu_speed"),
    (("machine", "cpu_vendor"), "cpu_vendor"),
    (("machine", "cpu_model"), "cpu_model"),
    (("machine", "cpu_name"), "cpu_model"),
    (("mainjob", "executable", "file_name"), "name"),
    (("mainjob", "status", "raw"), "raw"),
    (("mainjob", "status", "signalled_signal"), "signal"),
    (("mainjob", "status", "signalled_name"), "action"),
    (("mainjob", "status", "corefile"), "corefile"),
    (("mainjob", "status", "regular_exitcode"), "exitcode"),
    (("cwd",), "cwd"),
    (("files", "stdout", "data"), "stdout"),
    (("files", "stderr", "data"), "stderr"),
)


def _dig(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def from_yaml(data: dict[str, Any]) -> dict[str, Any]:
    """A Pegasus 5 YAML record -> flat record (monitord's names; `outputs` for output files)."""
    record: dict[str, Any] = {"invocation": True, "outputs": {}}
    for path, key in _YAML_MAP:
        value = _dig(data, path)
        if value is not None:
            record[key] = value
    files = data.get("files")
    if isinstance(files, dict):
        record["tot_ip_size_mb"], record["tot_op_size_mb"] = _io_sizes(files)
        for lfn, info in files.items():
            if isinstance(info, dict) and info.get("output"):
                record["outputs"][lfn] = _file_meta(info)
    return record


def _io_sizes(files: dict[str, Any]) -> tuple[float, float]:
    total_in = total_out = 0
    for lfn, info in files.items():
        if lfn in ("stdin", "stdout", "stderr", "metadata") or not isinstance(info, dict):
            continue
        if "size" not in info:
            continue
        try:
            size = int(info["size"])
        except (TypeError, ValueError):
            continue
        if "output" in info:
            if info["output"]:
                total_out += size
        else:
            total_in += size
    return round(total_in / 1048576, 6), round(total_out / 1048576, 6)


def _file_meta(info: dict[str, Any]) -> dict[str, str]:
    """rc.meta attributes of one output file, in monitord's order."""
    meta: dict[str, str] = {}
    if "user" in info:
        meta["user"] = str(info["user"])
    if "size" in info:
        meta["size"] = str(info["size"])
    if "ctime" in info:
        meta["ctime"] = info["ctime"]
    if "sha256" in info:
        meta["checksum.type"] = "sha256"
        meta["checksum.value"] = info["sha256"]
        if "checksum_timing" in info:
            meta["checksum.timing"] = str(info["checksum_timing"])
    return meta
