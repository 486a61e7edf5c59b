"""Pydantic models of the Stampede events, one per event name, built from `schema.py`.

Field names are the NetLogger dotted names (used as aliases: `job_inst.id`
validates into attribute `job_inst_id`). Extra fields (what monitord adds
beyond the schema: `root.xwf.id`, `wf.ts`, `dax`, ...) are kept, so a model
dumps back (`model_dump(by_alias=True)`) to every field it was given.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, create_model

from streamer.events import schema
from streamer.events.event import FieldError, parse_ts


def _ts_before(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        try:
            return parse_ts(value)
        except FieldError as exc:
            raise ValueError(str(exc)) from None
    return value


def _none_text(value: Any) -> Any:
    return None if value == "None" else value


Timestamp = Annotated[float, BeforeValidator(_ts_before)]
Uuid = Annotated[str, StringConstraints(pattern=schema.UUID_PATTERN)]
Number = Union[int, float]

_KIND_TYPES: dict[str, Any] = {
    "str": str,
    "uuid": Uuid,
    "int": int,
    "num": Annotated[Number, BeforeValidator(_ts_before)],
    "ts": Timestamp,
    "list": list[Any],
}


class StampedeEvent(BaseModel):
    """Base of every Stampede event model."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=False)

    event_name: ClassVar[str] = ""


def _attr(dotted: str) -> str:
    return dotted.replace(".", "_")


_LITERAL: Any = Literal  # applied to a run-time tuple of values


def _field_type(event_short: str, name: str, kind: str) -> Any:
    if name in schema.ENUMS:
        return _LITERAL[schema.ENUMS[name]]
    bounds = schema.INT_RANGES.get((event_short, name))
    if bounds is not None:
        return Annotated[int, Field(ge=bounds[0], le=bounds[1])]
    return _KIND_TYPES[kind]


def _build(name: str) -> type[StampedeEvent]:
    short = name[len(schema.STAMPEDE):]
    table = schema.fields_of(name) or {}
    definitions: dict[str, Any] = {}
    for dotted, (kind, mandatory) in table.items():
        annotation = _field_type(short, dotted, kind)
        if mandatory:
            definitions[_attr(dotted)] = (annotation, Field(alias=dotted))
        else:
            definitions[_attr(dotted)] = (
                Annotated[Optional[annotation], BeforeValidator(_none_text)],
                Field(default=None, alias=dotted),
            )
    class_name = "".join(part.capitalize() for part in short.replace("_", ".").split("."))
    model = create_model(class_name, __base__=StampedeEvent, **definitions)
    model.event_name = name
    return model


MODELS: dict[str, type[StampedeEvent]] = {name: _build(name) for name in schema.KNOWN_EVENTS}


class GenericEvent(StampedeEvent):
    """A `stampede.*` event the schema does not name: any fields, only `ts` checked."""

    ts: Timestamp


@cache
def model_for(name: str) -> type[StampedeEvent]:
    """The model of event `name`; GenericEvent for names the schema does not know."""
    return MODELS.get(name, GenericEvent)
