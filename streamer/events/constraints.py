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

Checked per event by the rules compiled once per event name (`Rules`): a membership test per mandatory
field, cheap beside parsing the line. Compiled by mypyc (setup.py's MYPYC) with `event.py`, so a file
source's loop pays one call per event; the interpreted module is the reference.
"""

from __future__ import annotations

from typing import Any

from streamer.events import schema
from streamer.events.event import Event, FieldError


class Rules:
    """What the schema asks of one event name beyond its fields' kinds (nothing for a name it does not name)."""

    def __init__(self, required: tuple[tuple[str, ...], ...] = (), ranges: tuple[tuple[str, int, int], ...] = (),
                 enums: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> None:
        self.required = required
        """Each mandatory field, with the names that satisfy it (itself first, then its alternative)."""
        self.mandatory = tuple(names[0] for names in required)
        self.ranges = ranges
        """(field, low, high): an int field's range."""
        self.enums = enums
        """(field, allowed values)."""


_rules: dict[str, Rules] = {}


def rules_of(name: str) -> Rules:
    """The rules of event `name`, compiled from the schema on first use."""
    rules = _rules.get(name)
    if rules is None:
        rules = _rules[name] = _compile(name)
    return rules


def _compile(name: str) -> Rules:
    table = schema.fields_of(name)
    if table is None:
        return Rules()
    short = name[len(schema.STAMPEDE):]
    tolerated = set(schema.ABSENT_TOLERATED.get(short, ()))
    required = tuple((field, *((alt,) if (alt := schema.ALTERNATIVE_NAMES.get((short, field))) else ()))
                     for field, (_, mandatory) in table.items() if mandatory and field not in tolerated)
    ranges = tuple((field, low, high) for (event, field), (low, high) in schema.INT_RANGES.items() if event == short)
    enums = tuple((field, values) for field, values in schema.ENUMS.items() if field in table and field != "level")
    return Rules(required, ranges, enums)


def check(event: Event) -> None:
    """Raise FieldError when `event` breaks a constraint of the schema (nothing for events it does not name)."""
    name = event.name
    rules = rules_of(name)
    fields = event.fields
    for field in rules.mandatory:  # the usual case: each one there
        if field not in fields:
            _mandatory(name, rules, fields)
            break
    for field, low, high in rules.ranges:
        value: Any = fields.get(field)
        if value is not None and not low <= value <= high:
            raise FieldError(f"{name}: field {field} = {value!r} is not within {low}..{high}")
    for field, values in rules.enums:
        value = fields.get(field)
        if value is not None and value not in values:
            raise FieldError(f"{name}: field {field} = {str(value)[:40]!r} is not a task type of the schema "
                             f"({', '.join(values)})")


def _mandatory(name: str, rules: Rules, fields: dict[str, Any]) -> None:
    """A mandatory field is absent under its own name: refused unless its alternative name is there."""
    for names in rules.required:
        if names[0] not in fields and not any(alt in fields for alt in names[1:]):
            raise FieldError(f"{name}: mandatory field {names[0]} missing")
