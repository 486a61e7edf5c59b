"""The constraints the event schema declares, applied to events read from outside.

Typing a line (`event.py`) makes every value fit its kind; this adds what the
schema (seed 002, `schema.py`) says beyond kinds, for the events it names:

- **mandatory fields** are present (`stampede.xwf.start` needs `restart_count`);
- **ranges**: `clustered` is 0 or 1, job and task `type` within 0..11 (`schema.INT_RANGES`);
- **enumerations**: `type_desc` is one of the task types (`schema.TASK_TYPES`; `level` is checked
  when the line is typed).

It keeps monitord's documented tolerances: a workflow id that is not a UUID is
used as given (braindump decides it), a value written `None` is a value, and
the mandatory fields real streams leave out (`schema.ABSENT_TOLERATED`:
monitord's JSON has no `ts` on static.start/end, a job never given a condor id
has no `sched.id`, Pegasus 3.1/4.0 streams have no `exitcode`, a plain DAGMan
workflow no planner fields) are accepted absent. Events the schema does not
name, and provenance records (their own models), pass. A refusal is a
`FieldError` naming the event and the field; the file sources report it as
`FILE:LINE: reason`, as any malformed line.

Checked per event from a table compiled once per event name: a few membership
tests, cheap beside parsing the line.
"""

from __future__ import annotations

from typing import Any

from . import schema
from .event import Event, FieldError

Rules = tuple[frozenset[str], tuple[tuple[str, ...], ...], tuple[tuple[str, int, int], ...],
              tuple[tuple[str, tuple[str, ...]], ...]]
"""(mandatory fields, the same each with the names that satisfy it), (field, low, high), (field, allowed values)."""

_rules: dict[str, Rules | None] = {}

MANDATORY_ONLY: dict[str, frozenset[str]] = {}
"""Event name -> its mandatory fields, for the names whose only rule they are (no range, no allowed values; an empty
set for events the schema does not name): for those `event.fields.keys() >= MANDATORY_ONLY[name]` is the whole of
`check`, which a hot loop tests inline and calls `check` only when it fails or the name is not here yet (`check`
fills it)."""


def _compile(name: str) -> Rules | None:
    table = schema.fields_of(name)
    if table is None:
        return None
    short = name[len(schema.STAMPEDE):]
    tolerated = set(schema.ABSENT_TOLERATED.get(short, ()))
    required = tuple((field, *((alt,) if (alt := schema.ALTERNATIVE_NAMES.get((short, field))) else ()))
                     for field, (_, mandatory) in table.items() if mandatory and field not in tolerated)
    ranges = tuple((field, low, high) for (event, field), (low, high) in schema.INT_RANGES.items() if event == short)
    enums = tuple((field, values) for field, values in schema.ENUMS.items() if field in table and field != "level")
    return frozenset(names[0] for names in required), required, ranges, enums


def check(event: Event) -> None:
    """Raise FieldError when `event` breaks a constraint of the schema (nothing for events it does not name)."""
    name = event.name
    try:
        rules = _rules[name]
    except KeyError:
        rules = _rules[name] = _compile(name)
        if rules is None or not (rules[2] or rules[3]):
            MANDATORY_ONLY[name] = frozenset() if rules is None else rules[0]
    if rules is None:
        return
    mandatory, required, ranges, enums = rules
    fields = event.fields
    if not fields.keys() >= mandatory:  # the usual case costs one set comparison
        for names in required:
            if names[0] not in fields and not any(alt in fields for alt in names[1:]):
                raise FieldError(f"{name}: mandatory field {names[0]} missing")
    for field, low, high in ranges:
        value: Any = fields.get(field)
        if value is not None and not low <= value <= high:
            raise FieldError(f"{name}: field {field} = {value!r} is not within {low}..{high}")
    for field, values in enums:
        value = fields.get(field)
        if value is not None and value not in values:
            raise FieldError(f"{name}: field {field} = {str(value)[:40]!r} is not a task type of the schema "
                             f"({', '.join(values)})")
