"""The schema of Chimbuko's provenance records (seed 004): one pydantic model per collection, and the checks.

Records are validated by these models (the seed's fields, nesting and types; unknown extra keys are kept)
when they enter from a file or the network; the event keeps the record's values exactly as written
(`records.py` turns records into events and back).
"""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Literal, NotRequired, Optional, Union, get_args, get_origin

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict

# typing's special forms, applied to types built at run time (mypy cannot check those subscripts)
_ANNOTATED: Any = Annotated
_UNION: Any = Union
_LIST: Any = list
_DICT: Any = dict
_TYPED_DICT: Any = TypedDict

Number = Union[int, float]


class _Record(BaseModel):
    """Strict types (no "5" for 5, no 1 for true); unknown keys are kept."""

    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)


# ---------------------------------------------------------------- nested parts

class CallFrame(_Record):
    """One function execution of a call stack (the first is the event's own)."""

    entry: Number
    exit: Number
    fid: int
    func: str
    event_id: str
    is_anomaly: Optional[bool] = None


class ExecWindowFrame(CallFrame):
    parent_event_id: Optional[str] = None


class CounterEvent(_Record):
    counter_idx: int
    counter_name: str
    counter_value: Number
    pid: int
    rid: int
    tid: int
    ts: Number


class CommEvent(_Record):
    """An MPI communication in the window around an anomaly."""

    type: Literal["SEND", "RECV"]
    pid: int
    rid: int
    tid: int
    src: int
    tar: int
    bytes: int
    tag: int
    timestamp: Number
    execdata_key: str


class EventWindow(_Record):
    exec_window: list[ExecWindowFrame] = []
    comm_window: list[CommEvent] = []


class NodeStateDatum(_Record):
    field: str
    value: Any


class NodeState(_Record):
    """TAU's monitoring-plugin view of the node."""

    data: list[NodeStateDatum]
    timestamp: Number


class GpuLocation(_Record):
    context: int
    device: int
    stream: int
    thread: int


class GpuParentFrame(_Record):
    entry: Number
    exit: Number
    fid: int
    func: str
    event_id: str


class GpuParent(_Record):
    event_id: str
    tid: int
    call_stack: list[GpuParentFrame] = []


class RunStats(_Record):
    """Chimbuko's RunStats: also the SSTD algorithm's parameters."""

    accumulate: Optional[Number] = None
    count: Number
    kurtosis: Number
    maximum: Number
    mean: Number
    minimum: Number
    skewness: Number
    stddev: Number


class Histogram(_Record):
    bin_counts: list[Number] = Field(alias="Histogram Bin Counts")
    bin_edges: list[Number] = Field(alias="Histogram Bin Edges")


class HistogramParams(_Record):
    """The HBOS and COPOD algorithms' parameters."""

    histogram: Histogram
    internal_global_threshold: Number


AlgoParams = Union[HistogramParams, RunStats, dict[str, Any]]
"""SSTD or HBOS/COPOD parameters; any other algorithm's object is accepted as it is."""


class AnomalyMetrics(_Record):
    anomaly_count: RunStats
    first_io_step: int
    last_io_step: int
    max_timestamp: Number
    min_timestamp: Number
    score: RunStats
    severity: RunStats


class RuntimeProfile(_Record):
    exclusive_runtime: RunStats
    inclusive_runtime: RunStats


# ---------------------------------------------------------------- records

class FunctionEvent(_Record):
    """A function execution: a record of `anomalies` or of `normalexecs`."""

    sonata_id: Optional[int] = Field(default=None, alias="__id")
    version: Optional[Union[int, str]] = None
    call_stack: list[CallFrame] = []
    counter_events: list[CounterEvent] = []
    entry: Number
    exit: Number
    event_id: str = Field(pattern=r"^\d+:\d+:\d+$")
    fid: int
    func: str
    algo_params: Optional[AlgoParams] = None
    is_gpu_event: bool = False
    gpu_location: Optional[GpuLocation] = None
    gpu_parent: Optional[GpuParent] = None
    pid: int
    rid: int
    tid: int
    hostname: Optional[str] = None
    runtime_exclusive: Number
    runtime_total: Number
    io_step: int
    io_step_tstart: Optional[Number] = None
    io_step_tend: Optional[Number] = None
    outlier_score: Optional[Number] = None
    outlier_severity: Optional[Number] = None
    event_window: Optional[EventWindow] = None
    node_state: Optional[NodeState] = None


class Metadata(_Record):
    sonata_id: Optional[int] = Field(default=None, alias="__id")
    descr: str
    pid: int
    rid: int
    tid: int
    value: Any


class FuncStats(_Record):
    sonata_id: Optional[int] = Field(default=None, alias="__id")
    app: int
    fid: int
    fname: str
    anomaly_metrics: Optional[AnomalyMetrics] = None
    runtime_profile: RuntimeProfile


class CounterStats(_Record):
    sonata_id: Optional[int] = Field(default=None, alias="__id")
    app: int
    counter: str
    stats: RunStats


class ADModel(_Record):
    sonata_id: Optional[int] = Field(default=None, alias="__id")
    pid: int
    fid: int
    func_name: str
    model: AlgoParams


MODELS: dict[str, type[_Record]] = {
    "chimbuko.anomaly": FunctionEvent,
    "chimbuko.normalexec": FunctionEvent,
    "chimbuko.metadata": Metadata,
    "chimbuko.func_stats": FuncStats,
    "chimbuko.counter_stats": CounterStats,
    "chimbuko.ad_model": ADModel,
}


class RecordError(ValueError):
    """A record that does not fit its collection's schema; the message names the field."""


# ---------------------------------------------------------------- checking a record

# The models above are the schema. Checking a record builds no model instance: each model is
# mirrored once as a TypedDict with the same keys (aliases), types and constraints, which
# pydantic checks in Rust without making an object per nested part (2-3x faster per record).

_TYPED: dict[type, Any] = {}
_UNION_TAGS = {"int", "float", "str", "bool", "none", "dict[str,any]"}


def _mirror(annotation: Any) -> Any:
    """`annotation` with every model in it replaced by its TypedDict."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _typed_dict(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _ANNOTATED[(_mirror(args[0]), *annotation.__metadata__)]
    if origin in (Union, UnionType):
        return _UNION[tuple(_mirror(a) for a in args)]
    if origin is list:
        return _LIST[_mirror(args[0])]
    if origin is dict:
        return _DICT[args[0], _mirror(args[1])]
    return annotation


def _typed_dict(model: type[BaseModel]) -> Any:
    typed = _TYPED.get(model)
    if typed is None:
        fields: dict[str, Any] = {}
        for name, info in model.model_fields.items():
            annotation = _mirror(info.annotation)
            if info.metadata:
                annotation = _ANNOTATED[(annotation, *info.metadata)]
            fields[info.alias or name] = annotation if info.is_required() else NotRequired[annotation]
        typed = _TYPED_DICT(model.__name__, fields)
        typed.__pydantic_config__ = ConfigDict(strict=True, extra="allow")
        _TYPED[model] = typed
        _UNION_TAGS.add(model.__name__)
    return typed


_checkers: dict[str, TypeAdapter[Any]] = {}


def _checker(name: str) -> TypeAdapter[Any]:
    checker = _checkers.get(name)
    if checker is None:
        checker = _checkers[name] = TypeAdapter(_typed_dict(MODELS[name]))
    return checker


def validate(name: str, record: dict[str, Any]) -> None:
    """Check `record` against its collection's model (raises RecordError naming the field)."""
    try:
        _checker(name).validate_python(record)
    except ValidationError as exc:
        raise RecordError(_describe(exc)) from None


def model(name: str, record: dict[str, Any]) -> _Record:
    """The pydantic model instance of a record (raises pydantic.ValidationError)."""
    return MODELS[name].model_validate(record)


def _describe(exc: ValidationError) -> str:
    """The first problem, named by the record's own keys (union alternatives merged)."""
    problems: dict[str, list[Any]] = {}
    for error in exc.errors(include_url=False):
        loc = [str(p) for p in error["loc"] if not (isinstance(p, str) and p in _UNION_TAGS)]
        problems.setdefault(".".join(loc) or "record", []).append(error)
    where, errors = next(iter(problems.items()))
    first = errors[0]
    if first["type"] == "missing":
        text = f"missing field {where}"
    else:
        kinds = {e["type"] for e in errors}
        message = "input should be a number" if kinds == {"int_type", "float_type"} else first["msg"].lower()
        value = first.get("input")
        shown = orjson.dumps(value, default=str).decode()[:60] if value is not None else "null"
        text = f"field {where}: {message} (got {shown})"
    more = len(problems) - 1
    return text + (f" (+{more} more)" if more else "")
