"""The deploy pipeline names only fields streamer publishes, with the right types.

Checks the Logstash pipeline (via logstash/check_pipeline.py), the index
templates and the Grafana dashboards over Elasticsearch against the JSON
messages of the golden and corpus event streams, and that the stable event id
(the Elasticsearch document id) never joins two distinct events.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from streamer.events import bp, jsonenc, schema

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
LOGSTASH = ROOT / "logstash"
PIPELINE = LOGSTASH / "pipeline" / "stampede.conf"
TEMPLATES = {"pegasus-events": LOGSTASH / "templates" / "pegasus-events.json",
             "pegasus-composite": LOGSTASH / "templates" / "pegasus-composite.json"}
DEFINITIONS = DEPLOY / "rabbitmq" / "definitions.json"
DASHBOARDS = DEPLOY / "grafana" / "dashboards"
COMPOSITE = "stampede.job_inst.composite"

pytestmark = pytest.mark.corpus


def _load_checker() -> Any:
    spec = importlib.util.spec_from_file_location("check_pipeline", LOGSTASH / "check_pipeline.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["check_pipeline"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


checker = _load_checker()


# ---------------------------------------------------------------- what streamer publishes

def _bp_files(golden: Path, corpus: Path) -> list[Path]:
    return sorted(golden.glob("*.bp")) + sorted(corpus.rglob("*.bp"))


@lru_cache(maxsize=1)
def _streams(golden: Path, corpus: Path) -> tuple[list[Any], dict[str, set[str]]]:
    """(events parsed from every .bp line, golden JSON keys per event name)."""
    events = []
    for path in _bp_files(golden, corpus):
        for line in path.read_text(errors="replace").splitlines():
            if line.strip():
                events.append(bp.parse_line(line))
    golden_keys: dict[str, set[str]] = defaultdict(set)
    for path in sorted(golden.glob("*.json")):
        for line in path.read_text().splitlines():
            obj = json.loads(line)
            golden_keys[obj["event"]].update(obj)
    return events, golden_keys


@pytest.fixture(scope="module")
def streams(golden: Path, corpus: Path) -> tuple[list[Any], dict[str, set[str]]]:
    return _streams(golden, corpus)


@pytest.fixture(scope="module")
def message_fields(streams: tuple[list[Any], dict[str, set[str]]]) -> dict[str, dict[str, set[type]]]:
    """Event name -> JSON key -> Python types of its values, as streamer publishes them."""
    events, golden_keys = streams
    fields: dict[str, dict[str, set[type]]] = defaultdict(lambda: defaultdict(set))
    for event in events:
        for key, value in jsonenc.to_dict(event).items():
            fields[event.name][key].add(type(value))
    for name, keys in golden_keys.items():
        for key in keys:
            fields[name].setdefault(key, set())
    return fields


def _all_keys(fields: dict[str, dict[str, set[type]]], names: Any = None) -> set[str]:
    return {k for name, table in fields.items() if names is None or name in names for k in table}


def _topic_match(pattern: str, key: str) -> bool:
    """AMQP topic matching: `*` one word, `#` zero or more words."""
    def match(p: list[str], k: list[str]) -> bool:
        if not p:
            return not k
        if p[0] == "#":
            return any(match(p[1:], k[i:]) for i in range(len(k) + 1))
        return bool(k) and (p[0] == "*" or p[0] == k[0]) and match(p[1:], k[1:])
    return match(pattern.split("."), key.split("."))


def selected_events(names: Any) -> set[str]:
    """Event names the Logstash queue receives, by the definitions' bindings."""
    defs = json.loads(DEFINITIONS.read_text())
    keys = [b["routing_key"] for b in defs["bindings"] if b["destination"] == "workflows-es"]
    return {n for n in names if any(_topic_match(k, n) for k in keys)}


def test_topic_matching_helper() -> None:
    assert _topic_match("stampede.job_inst.#", "stampede.job_inst.main.end")
    assert _topic_match("stampede.xwf.#", "stampede.xwf")
    assert not _topic_match("stampede.wf.plan", "stampede.wf.plan.x")
    assert not _topic_match("stampede.inv.#", "stampede.invx.end")


def test_corpus_is_big_enough_to_mean_something(streams: tuple[list[Any], dict[str, set[str]]]) -> None:
    events, golden_keys = streams
    assert len(events) > 5_000
    assert {"stampede.inv.end", "stampede.job_inst.composite", "stampede.xwf.end"} <= set(golden_keys)


# ---------------------------------------------------------------- stable ids

def test_distinct_events_never_share_a_document_id(streams: tuple[list[Any], dict[str, set[str]]]) -> None:
    events, _ = streams
    by_id: dict[str, set[bytes]] = defaultdict(set)
    for event in events:
        by_id[event.id].add(jsonenc.dumps(event, with_id=False))
    collisions = {i: c for i, c in by_id.items() if len(c) > 1}
    assert collisions == {}
    distinct = {c for contents in by_id.values() for c in contents}
    assert len(by_id) == len(distinct)


def test_ts_alone_would_collide(streams: tuple[list[Any], dict[str, set[str]]]) -> None:
    """The flaw being fixed: monitord's example pipeline used `ts` as the document id."""
    events, _ = streams
    by_ts: dict[Any, set[str]] = defaultdict(set)
    for event in events:
        by_ts[event.ts].add(event.id)
    lost = sum(len(ids) - 1 for ids in by_ts.values())
    assert lost > len(events) // 2  # most events would have overwritten another


# ---------------------------------------------------------------- Logstash pipeline

@pytest.fixture(scope="module")
def pipeline() -> Any:
    return checker.parse(PIPELINE.read_text())


def test_pipeline_reads_only_published_fields(pipeline: Any, message_fields: dict) -> None:
    published = _all_keys(message_fields, selected_events(message_fields)) | {"event_id"}
    referenced = checker.message_fields(pipeline)
    assert {"ts", "start_time", "dur", "remote_cpu_time", "event", "event_id"} <= referenced
    assert referenced - published == set()


def test_document_id_is_the_stable_event_id(pipeline: Any) -> None:
    plugins = checker.plugins(pipeline)
    outputs = [p for p in plugins if p.name == "elasticsearch"]
    assert len(outputs) == 2
    assert {checker.setting(p, "document_id") for p in outputs} == {"%{[@metadata][doc_id]}"}
    assert {checker.setting(p, "action") for p in outputs} == {"index"}
    # the first arm that sets doc_id copies event_id; the AMQP message_id is the fallback
    branches = [s for s in pipeline.sections["filter"] if isinstance(s, checker.Branch)]
    (first,) = [b for b in branches if b.arms[0][0] and b.arms[0][0][0].text == "[event_id]"]
    # after the date filter: the fallback hash sees @timestamp = ts, not the arrival time
    order = [s.name if isinstance(s, checker.Plugin) else "if" for s in pipeline.sections["filter"]]
    assert order.index("date") < pipeline.sections["filter"].index(first)
    conditions = [[t.text for t in cond] if cond else None for cond, _ in first.arms]
    assert conditions == [["[event_id]"], ["[@metadata][rabbitmq_properties][message-id]"], None]
    copies = [checker.setting(body[0], "copy") for _, body in first.arms[:2]]
    assert copies == [{"event_id": "[@metadata][doc_id]"},
                      {"[@metadata][rabbitmq_properties][message-id]": "[@metadata][doc_id]"}]
    fingerprint = first.arms[2][1][0]
    assert fingerprint.name == "fingerprint"
    assert checker.setting(fingerprint, "concatenate_all_fields") == "true"
    assert checker.setting(fingerprint, "source") is None  # never `ts` alone


def test_pipeline_outputs_use_the_templates(pipeline: Any) -> None:
    outputs = {checker.setting(p, "template_name"): p for p in checker.plugins(pipeline) if p.name == "elasticsearch"}
    assert set(outputs) == set(TEMPLATES)
    for name, plugin in outputs.items():
        assert checker.setting(plugin, "template") == f"/usr/share/logstash/templates/{name}.json"
        assert checker.setting(plugin, "index") == f"{name}-%{{+YYYY.MM}}"
        assert checker.setting(plugin, "template_api") == "composable"


def test_checker_finds_fields_in_every_construct() -> None:
    text = """
    # comment
    input { rabbitmq { queue => "q" codec => json } }
    filter {
      if [a][b] == "x" and [c] in ["1", "2"] { mutate { convert => { "d" => "float" } } }
      else if ![e] { date { match => ["f", "UNIX"] target => "g" } }
      else { mutate { copy => { "h" => "[@metadata][i]" } add_field => { "j" => "%{k}-%{[l][m]}" } } }
    }
    output { stdout { codec => rubydebug } }
    """
    parsed = checker.parse(text)
    assert checker.message_fields(parsed) == {"a.b", "c", "d", "e", "f", "h", "k", "l.m"}
    assert checker.field_use(parsed).written == {"g", "@metadata.i", "j"}
    with pytest.raises(checker.ConfigSyntaxError):
        checker.parse("filter { mutate { convert => } }")


# ---------------------------------------------------------------- index templates

_FITS = {int: {"long", "integer", "double", "float"}, float: {"double", "float"},
         str: {"keyword", "text"}, list: {"object", "nested", "flattened"}, dict: {"object", "flattened"},
         type(None): {"long", "integer", "double", "float", "keyword", "text", "object", "date"}}  # null = absent
_KINDS = {"int": {"long", "integer"}, "num": {"double", "float"}, "ts": {"double", "date"},
          "str": {"keyword", "text"}, "uuid": {"keyword"}, "list": {"object", "nested", "flattened"}}


def _properties(name: str) -> dict[str, dict[str, Any]]:
    template = json.loads(TEMPLATES[name].read_text())
    assert template["index_patterns"] == [f"{name}-*"]
    return template["template"]["mappings"]["properties"]


def _template_for(event: str) -> str:
    return "pegasus-composite" if event == COMPOSITE else "pegasus-events"


def test_every_published_field_has_a_mapping_of_its_type(message_fields: dict) -> None:
    problems = []
    for event in sorted(selected_events(message_fields)):
        props = _properties(_template_for(event))
        for key, types in message_fields[event].items():
            mapping = props.get(key)
            if mapping is None:
                problems.append(f"{event}: {key} has no mapping")
                continue
            for kind in types:
                if mapping["type"] not in _FITS[kind]:
                    problems.append(f"{event}: {key} is {kind.__name__}, mapped {mapping['type']}")
    assert problems == []


def test_mappings_follow_the_schema_and_name_only_stampede_fields(message_fields: dict) -> None:
    published = _all_keys(message_fields) | {"event_id", "@timestamp", "start_time_human"}
    for template in TEMPLATES:
        names = [n for n in schema.KNOWN_EVENTS if n in selected_events(schema.KNOWN_EVENTS)
                 and _template_for(n) == template]
        declared: dict[str, set[str]] = defaultdict(set)
        for name in names:
            for dotted, (kind, _) in schema.fields_of(name).items():
                declared[jsonenc.json_key(dotted)].add(kind)
        props = _properties(template)
        for key, mapping in props.items():
            assert key in published or key in declared, f"{template}: {key} is no Stampede field"
            for kind in declared.get(key, ()):
                assert mapping["type"] in _KINDS[kind], f"{template}: {key} ({kind}) mapped {mapping['type']}"
        assert props["event_id"]["type"] == "keyword"
        assert props["xwf_id"]["type"] == "keyword"
        assert props["@timestamp"]["type"] == "date"


def test_composites_have_their_own_index(message_fields: dict) -> None:
    composite = _properties("pegasus-composite")
    assert composite["invocations"] == {"type": "object", "enabled": False}
    assert {"hostname", "exitcode", "local_dur", "cpu_count"} <= set(composite)
    assert "transformation" not in composite and "invocations" not in _properties("pegasus-events")


# ---------------------------------------------------------------- dashboards over Elasticsearch

_LUCENE_FIELD = re.compile(r'(?<![\w."\\])([A-Za-z_@][\w.@]*):')


def _lucene_fields(query: str) -> set[str]:
    without_quoted = re.sub(r'"(?:[^"\\]|\\.)*"', '""', query)
    return set(_LUCENE_FIELD.findall(without_quoted))


def es_fields(dashboard: dict[str, Any]) -> set[str]:
    """Every document field an Elasticsearch panel or variable of `dashboard` names."""
    found: set[str] = set()
    for panel in dashboard["panels"]:
        if panel["datasource"]["type"] != "elasticsearch":
            continue
        for target in panel["targets"]:
            found |= _lucene_fields(target["query"])
            found |= {m["field"] for m in target["metrics"] if "field" in m}
            found |= {b["field"] for b in target["bucketAggs"] if "field" in b}
        for step in panel["transformations"]:
            options = step["options"]
            found |= set(options.get("indexByName", {})) | set(options.get("include", {}).get("names", []))
            found |= set(options.get("fields", []))
        if "xField" in panel["options"]:
            found.add(panel["options"]["xField"])
    for variable in dashboard["templating"]["list"]:
        if variable["datasource"]["type"] == "elasticsearch":
            query = json.loads(variable["query"])
            found |= {query["field"]} | _lucene_fields(query["query"])
    return found


def test_lucene_field_extraction() -> None:
    assert _lucene_fields('event:"stampede.xwf.end" AND NOT status:0 AND xwf_id:$xwf_id') == \
        {"event", "status", "xwf_id"}
    assert _lucene_fields('event:("a:b" OR "c") AND dur:>5') == {"event", "dur"}


def test_dashboards_over_elasticsearch_name_published_fields(message_fields: dict) -> None:
    dashboard = json.loads((DASHBOARDS / "stampede-events.json").read_text())
    fields = es_fields(dashboard)
    assert {"event", "xwf_id", "exitcode", "hostname", "transformation", "dur", "job_id", "@timestamp"} <= fields
    published = _all_keys(message_fields, selected_events(message_fields)) | {"event_id", "@timestamp"}
    assert fields - published == set()
    # and every such field is mapped in the index its datasource reads
    for panel in dashboard["panels"]:
        index = {"pegasus-es-events": "pegasus-events", "pegasus-es-composite": "pegasus-composite"}[
            panel["datasource"]["uid"]]
        single = {"panels": [panel], "templating": {"list": []}}
        assert es_fields(single) - set(_properties(index)) == set(), panel["title"]


def test_dashboard_event_names_are_indexed() -> None:
    dashboard = json.loads((DASHBOARDS / "stampede-events.json").read_text())
    text = json.dumps(dashboard)
    names = set(re.findall(r'\\"(stampede\.[a-z_.]+)\\"', text))
    assert {"stampede.xwf.end", "stampede.inv.end", COMPOSITE} <= names
    assert names <= selected_events(schema.KNOWN_EVENTS)
