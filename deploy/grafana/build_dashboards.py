"""Build the provisioned Grafana dashboards of the streamer pipeline.

Why a script: a Grafana dashboard is a few hundred lines of repetitive JSON;
its meaning here is a handful of queries. The queries live below, readable and
tested (tests/deploy/test_deploy_postgres.py runs the SQL on PostgreSQL and checks
every Elasticsearch field against streamer's messages); the JSON files in
dashboards/ are this script's output and must stay in sync with it:

    python deploy/grafana/build_dashboards.py          # rewrite dashboards/*.json
    python deploy/grafana/build_dashboards.py --check  # exit 1 if they differ
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "dashboards"


def _progress_panels() -> Any:
    """progress_panels.py next to this file (loaded by path: this script is not a package)."""
    spec = importlib.util.spec_from_file_location("progress_panels", HERE / "progress_panels.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


PROGRESS = _progress_panels()
SQL_PROGRESS, SQL_HELD, SQL_RETRIED = PROGRESS.SQL_PROGRESS, PROGRESS.SQL_HELD, PROGRESS.SQL_RETRIED
SQL_CPU, SQL_INTEGRITY, SQL_SUBWORKFLOWS = PROGRESS.SQL_CPU, PROGRESS.SQL_INTEGRITY, PROGRESS.SQL_SUBWORKFLOWS

PG = {"type": "grafana-postgresql-datasource", "uid": "stampede-pg"}
ES_EVENTS = {"type": "elasticsearch", "uid": "pegasus-es-events"}
ES_COMPOSITE = {"type": "elasticsearch", "uid": "pegasus-es-composite"}

# Job states as colours: the same palette in both dashboards.
STATE_COLOURS = {
    "SUBMIT": "yellow", "EXECUTE": "blue", "JOB_TERMINATED": "purple",
    "JOB_SUCCESS": "green", "JOB_FAILURE": "red", "JOB_HELD": "orange",
    "JOB_RELEASED": "light-blue", "JOB_EVICTED": "dark-orange",
    "POST_SCRIPT_STARTED": "light-purple", "POST_SCRIPT_TERMINATED": "purple",
    "POST_SCRIPT_SUCCESS": "green", "POST_SCRIPT_FAILED": "red",
    "PRE_SCRIPT_STARTED": "light-purple", "PRE_SCRIPT_SUCCESS": "green",
    "PRE_SCRIPT_FAILED": "red", "SUBMIT_FAILED": "red",
}
EVENT_COLOURS = {
    "stampede.job_inst.submit.start": "yellow", "stampede.job_inst.held.start": "orange",
    "stampede.job_inst.main.start": "blue", "stampede.job_inst.main.term": "purple",
    "stampede.job_inst.main.end": "green", "stampede.job_inst.post.start": "light-purple",
    "stampede.job_inst.post.end": "green", "stampede.job_inst.pre.start": "light-purple",
}

# ---------------------------------------------------------------- SQL (Stampede DB)

SQL_WORKFLOW_STATUS = """\
WITH latest AS (
  SELECT DISTINCT ON (ws.wf_id) ws.wf_id, ws.state, ws.status
  FROM workflowstate ws
  ORDER BY ws.wf_id, ws.timestamp DESC, ws.state DESC
)
SELECT
  count(*) FILTER (WHERE latest.state = 'WORKFLOW_STARTED') AS "running",
  count(*) FILTER (WHERE latest.state = 'WORKFLOW_TERMINATED' AND latest.status = 0) AS "succeeded",
  count(*) FILTER (WHERE latest.state = 'WORKFLOW_TERMINATED' AND coalesce(latest.status, -1) <> 0) AS "failed"
FROM latest"""

SQL_WORKFLOWS = """\
SELECT
  to_timestamp(min(ws.timestamp) FILTER (WHERE ws.state = 'WORKFLOW_STARTED')) AS "started",
  to_timestamp(max(ws.timestamp) FILTER (WHERE ws.state = 'WORKFLOW_TERMINATED')) AS "ended",
  w.dax_label AS "workflow",
  CASE
    WHEN count(ws.state) = 0 THEN 'planned'
    WHEN (array_agg(ws.state ORDER BY ws.timestamp DESC, ws.state DESC))[1] = 'WORKFLOW_STARTED' THEN 'running'
    WHEN (array_agg(ws.status ORDER BY ws.timestamp DESC, ws.state DESC))[1] = 0 THEN 'succeeded'
    ELSE 'failed'
  END AS "status",
  max(ws.restart_count) AS "restarts",
  CASE WHEN w.parent_wf_id IS NULL THEN 'root' ELSE 'sub' END AS "level",
  w.submit_hostname AS "submit host",
  w."user" AS "user",
  w.wf_uuid AS "uuid"
FROM workflow w
LEFT JOIN workflowstate ws ON ws.wf_id = w.wf_id
GROUP BY w.wf_id
HAVING $__unixEpochFilter(coalesce(max(ws.timestamp), w.timestamp))
ORDER BY coalesce(max(ws.timestamp), w.timestamp) DESC
LIMIT 200"""

SQL_JOB_STATES = """\
SELECT
  $__unixEpochGroupAlias(js.timestamp, $__interval),
  js.state AS "metric",
  count(*) AS "value"
FROM jobstate js
JOIN job_instance ji ON ji.job_instance_id = js.job_instance_id
JOIN job j ON j.job_id = ji.job_id
WHERE $__unixEpochFilter(js.timestamp) AND j.wf_id IN ($workflow)
GROUP BY 1, 2
ORDER BY 1, 2"""

SQL_FAILED_JOBS = """\
SELECT
  to_timestamp(last_state.ts) AS "time",
  w.dax_label AS "workflow",
  j.exec_job_id AS "job",
  ji.job_submit_seq AS "try",
  ji.exitcode AS "exit code",
  h.hostname AS "host",
  ji.site AS "site",
  j.type_desc AS "type",
  w.wf_uuid AS "uuid"
FROM job_instance ji
JOIN job j ON j.job_id = ji.job_id
JOIN workflow w ON w.wf_id = j.wf_id
LEFT JOIN host h ON h.host_id = ji.host_id
JOIN LATERAL (
  SELECT max(js.timestamp) AS ts FROM jobstate js WHERE js.job_instance_id = ji.job_instance_id
) last_state ON true
WHERE ji.exitcode <> 0 AND $__unixEpochFilter(last_state.ts) AND j.wf_id IN ($workflow)
ORDER BY 1 DESC, 3
LIMIT 500"""

SQL_FAILED_INVOCATIONS = """\
SELECT
  to_timestamp(i.start_time) AS "start",
  i.transformation AS "transformation",
  i.exitcode AS "exit code",
  h.hostname AS "host",
  i.remote_duration AS "duration (s)",
  j.exec_job_id AS "job",
  i.abs_task_id AS "task"
FROM invocation i
JOIN job_instance ji ON ji.job_instance_id = i.job_instance_id
JOIN job j ON j.job_id = ji.job_id
LEFT JOIN host h ON h.host_id = ji.host_id
WHERE i.exitcode <> 0 AND $__unixEpochFilter(i.start_time) AND i.wf_id IN ($workflow)
ORDER BY 1 DESC, 2
LIMIT 500"""

SQL_FAILURES_BY_HOST = """\
SELECT
  coalesce(h.hostname, '(unknown)') AS "host",
  count(*) AS "failed job instances"
FROM job_instance ji
JOIN job j ON j.job_id = ji.job_id
LEFT JOIN host h ON h.host_id = ji.host_id
JOIN LATERAL (
  SELECT max(js.timestamp) AS ts FROM jobstate js WHERE js.job_instance_id = ji.job_instance_id
) last_state ON true
WHERE ji.exitcode <> 0 AND $__unixEpochFilter(last_state.ts) AND j.wf_id IN ($workflow)
GROUP BY 1
ORDER BY 2 DESC, 1"""

SQL_DURATIONS = """\
SELECT
  i.transformation AS "transformation",
  count(*) AS "invocations",
  count(*) FILTER (WHERE i.exitcode <> 0) AS "failed",
  round(avg(i.remote_duration), 3) AS "mean (s)",
  min(i.remote_duration) AS "min (s)",
  max(i.remote_duration) AS "max (s)",
  sum(i.remote_duration) AS "total (s)",
  round(avg(i.remote_cpu_time), 3) AS "mean cpu (s)"
FROM invocation i
WHERE $__unixEpochFilter(i.start_time) AND i.wf_id IN ($workflow)
GROUP BY 1
ORDER BY "total (s)" DESC, 1"""

SQL_GANTT = """\
SELECT
  to_timestamp(js.timestamp) AS "time",
  j.exec_job_id || ' #' || ji.job_submit_seq AS "job",
  js.state AS "state"
FROM jobstate js
JOIN job_instance ji ON ji.job_instance_id = js.job_instance_id
JOIN job j ON j.job_id = ji.job_id
WHERE $__unixEpochFilter(js.timestamp) AND j.wf_id IN ($workflow)
ORDER BY 1, js.jobstate_submit_seq"""

SQL_WORKFLOW_VARIABLE = """\
SELECT w.dax_label || ' (' || w.wf_uuid || ')' AS __text, w.wf_id AS __value
FROM workflow w
ORDER BY w.timestamp DESC"""

# ---------------------------------------------------------------- Lucene (Elasticsearch)

JOB_STATE_EVENTS = (
    "stampede.job_inst.pre.start", "stampede.job_inst.submit.start", "stampede.job_inst.held.start",
    "stampede.job_inst.held.end", "stampede.job_inst.main.start", "stampede.job_inst.main.term",
    "stampede.job_inst.main.end", "stampede.job_inst.post.start", "stampede.job_inst.post.end",
)


def _any_event(names: tuple[str, ...]) -> str:
    return "event:(" + " OR ".join(f'"{n}"' for n in names) + ")"


Q_XWF = 'xwf_id:$xwf_id'
Q_STARTED = f'event:"stampede.xwf.start" AND restart_count:0 AND {Q_XWF}'
Q_SUCCEEDED = f'event:"stampede.xwf.end" AND status:0 AND {Q_XWF}'
Q_FAILED = f'event:"stampede.xwf.end" AND NOT status:0 AND {Q_XWF}'
Q_JOB_STATES = f"{_any_event(JOB_STATE_EVENTS)} AND {Q_XWF}"
Q_FAILED_COMPOSITE = f'event:"stampede.job_inst.composite" AND NOT exitcode:0 AND {Q_XWF}'
Q_FAILED_INV = f'event:"stampede.inv.end" AND NOT exitcode:0 AND {Q_XWF}'
Q_INV = f'event:"stampede.inv.end" AND {Q_XWF}'


# ---------------------------------------------------------------- panel builders

class Layout:
    """Hands out grid positions row by row (Grafana's grid is 24 wide)."""

    def __init__(self) -> None:
        self.x = self.y = self.row_h = 0
        self.next_id = 1

    def place(self, w: int, h: int) -> dict[str, int]:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        pos = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def panel(layout: Layout, kind: str, title: str, ds: dict[str, str], targets: list[dict[str, Any]],
          w: int, h: int, *, description: str = "", options: dict[str, Any] | None = None,
          defaults: dict[str, Any] | None = None, transformations: list[dict[str, Any]] | None = None,
          overrides: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": layout.new_id(),
        "type": kind,
        "title": title,
        "description": description,
        "gridPos": layout.place(w, h),
        "datasource": ds,
        "targets": targets,
        "fieldConfig": {"defaults": defaults or {}, "overrides": overrides or []},
        "options": options or {},
        "transformations": transformations or [],
    }


def sql(ref: str, text: str, fmt: str = "table") -> dict[str, Any]:
    return {"refId": ref, "datasource": PG, "editorMode": "code", "format": fmt,
            "rawQuery": True, "rawSql": text}


def es(ref: str, query: str, metrics: list[dict[str, Any]], buckets: list[dict[str, Any]],
       ds: dict[str, str] = ES_EVENTS) -> dict[str, Any]:
    return {"refId": ref, "datasource": ds, "query": query, "alias": "",
            "metrics": metrics, "bucketAggs": buckets, "timeField": "@timestamp"}


def es_count(ref: str, query: str, ds: dict[str, str] = ES_EVENTS) -> dict[str, Any]:
    return es(ref, query, [{"id": "1", "type": "count"}],
              [{"id": "2", "type": "date_histogram", "field": "@timestamp", "settings": {"interval": "auto"}}], ds)


def es_raw(ref: str, query: str, ds: dict[str, str] = ES_EVENTS, size: int = 500) -> dict[str, Any]:
    return es(ref, query, [{"id": "1", "type": "raw_data", "settings": {"size": str(size)}}], [], ds)


def organize(fields: list[str], rename: dict[str, str] | None = None) -> dict[str, Any]:
    """Keep `fields` in this order (others hidden), renamed for people."""
    return {"id": "organize", "options": {
        "excludeByName": {},
        "indexByName": {name: i for i, name in enumerate(fields)},
        "renameByName": rename or {},
        "includeByName": {name: True for name in fields},
    }}


def filter_fields(fields: list[str]) -> dict[str, Any]:
    return {"id": "filterFieldsByName", "options": {"include": {"names": fields}}}


def colour_mappings(colours: dict[str, str]) -> list[dict[str, Any]]:
    return [{"type": "value", "options": {
        value: {"color": colour, "index": i} for i, (value, colour) in enumerate(colours.items())}}]


def stat(layout: Layout, title: str, ds: dict[str, str], target: dict[str, Any], colour: str,
         w: int = 4) -> dict[str, Any]:
    return panel(layout, "stat", title, ds, [target], w, 4,
                 options={"reduceOptions": {"calcs": ["sum"], "fields": "", "values": False},
                          "colorMode": "background", "graphMode": "none", "textMode": "value"},
                 defaults={"color": {"mode": "fixed", "fixedColor": colour}, "unit": "none"})


def state_timeline(layout: Layout, title: str, ds: dict[str, str], target: dict[str, Any],
                   by: str, fields: list[str], colours: dict[str, str], description: str) -> dict[str, Any]:
    return panel(layout, "state-timeline", title, ds, [target], 24, 14, description=description,
                 options={"showValue": "never", "mergeValues": True, "rowHeight": 0.8,
                          "alignValue": "left", "legend": {"showLegend": True, "displayMode": "list",
                                                           "placement": "bottom"},
                          "tooltip": {"mode": "single", "sort": "none"}},
                 defaults={"color": {"mode": "fixed", "fixedColor": "text"},
                           "mappings": colour_mappings(colours)},
                 transformations=[filter_fields(fields),
                                  {"id": "partitionByValues",
                                   "options": {"fields": [by], "keepFields": False,
                                               "naming": {"asLabels": False}}}])


def dashboard(uid: str, title: str, description: str, panels: list[dict[str, Any]],
              variables: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "uid": uid, "title": title, "description": description,
        "tags": ["pegasus", "stampede", "streamer"],
        "editable": False, "graphTooltip": 1, "timezone": "browser",
        "time": {"from": "now-7d", "to": "now"}, "refresh": "1m",
        "schemaVersion": 39, "version": 1,
        "templating": {"list": variables}, "annotations": {"list": []},
        "links": [], "panels": panels,
    }


# ---------------------------------------------------------------- dashboards

def stampede_db() -> dict[str, Any]:
    """Over the PostgreSQL Stampede DB that streamer (or monitord) fills."""
    lay = Layout()
    panels = [
        stat(lay, "Running workflows", PG, sql("A", SQL_WORKFLOW_STATUS), "blue"),
        stat(lay, "Succeeded workflows", PG, sql("A", SQL_WORKFLOW_STATUS), "green"),
        stat(lay, "Failed workflows", PG, sql("A", SQL_WORKFLOW_STATUS), "red"),
    ]
    for p, column in zip(panels, ("running", "succeeded", "failed")):
        p["options"]["reduceOptions"]["fields"] = f"/^{column}$/"
        p["description"] = "Every workflow in the database (sub-workflows too), by its latest state."
    panels.append(panel(lay, "table", "Workflows", PG, [sql("A", SQL_WORKFLOWS)], 12, 8,
                        description="Workflows planned or with a state change in the time range ('planned': no state yet)."))
    panels.append(panel(lay, "timeseries", "Job states over time", PG,
                        [sql("A", SQL_JOB_STATES, "time_series")], 24, 9,
                        description="jobstate rows per state and interval (jobstate.log, as a chart).",
                        options={"legend": {"showLegend": True, "displayMode": "table", "placement": "right",
                                            "calcs": ["sum"]}},
                        defaults={"custom": {"drawStyle": "bars", "stacking": {"mode": "normal"},
                                             "fillOpacity": 80}}))
    panels.append(panel(lay, "table", "Failed job instances", PG, [sql("A", SQL_FAILED_JOBS)], 16, 10,
                        description="Job instances that ended with a non-zero exit code, with the host they ran on."))
    panels.append(panel(lay, "barchart", "Failures per host", PG, [sql("A", SQL_FAILURES_BY_HOST)], 8, 10,
                        options={"orientation": "horizontal", "xField": "host", "showValue": "auto"}))
    panels.append(panel(lay, "table", "Failed invocations", PG, [sql("A", SQL_FAILED_INVOCATIONS)], 24, 8,
                        description="Kickstart records with a non-zero exit code."))
    panels.append(panel(lay, "table", "Durations per transformation", PG, [sql("A", SQL_DURATIONS)], 14, 10,
                        description="Remote (kickstart) durations of invocations, per transformation."))
    panels.append(panel(lay, "barchart", "Mean duration per transformation", PG, [sql("A", SQL_DURATIONS)], 10, 10,
                        options={"orientation": "horizontal", "xField": "transformation", "showValue": "auto"},
                        defaults={"unit": "s"},
                        transformations=[filter_fields(["transformation", "mean (s)"])]))
    panels.extend(PROGRESS.db_panels(sys.modules[__name__], lay))
    panels.append(state_timeline(lay, "Job instances (Gantt)", PG, sql("A", SQL_GANTT), "job",
                                 ["time", "job", "state"], STATE_COLOURS,
                                 "One row per job instance (job #try), coloured by its state over time."))
    variables = [{
        "name": "workflow", "label": "Workflow", "type": "query", "datasource": PG,
        "query": SQL_WORKFLOW_VARIABLE, "definition": SQL_WORKFLOW_VARIABLE,
        "refresh": 2, "multi": True, "includeAll": True, "current": {"text": "All", "value": "$__all"},
        "sort": 0,
    }]
    return dashboard("pegasus-stampede-db", "Pegasus workflows (Stampede DB)",
                     "Workflows, jobs and invocations from the PostgreSQL Stampede database.", panels, variables)


def stampede_events() -> dict[str, Any]:
    """Over the Elasticsearch indices Logstash fills from RabbitMQ."""
    lay = Layout()
    panels = [
        stat(lay, "Workflows started", ES_EVENTS, es_count("A", Q_STARTED), "blue"),
        stat(lay, "Workflows succeeded", ES_EVENTS, es_count("A", Q_SUCCEEDED), "green"),
        stat(lay, "Workflows failed", ES_EVENTS, es_count("A", Q_FAILED), "red"),
    ]
    panels.append(panel(lay, "barchart", "Failures per host", ES_COMPOSITE,
                        [es("A", Q_FAILED_COMPOSITE, [{"id": "1", "type": "count"}],
                            [{"id": "2", "type": "terms", "field": "hostname",
                              "settings": {"size": "20", "order": "desc", "orderBy": "_count", "min_doc_count": "1"}}],
                            ES_COMPOSITE)], 12, 8,
                        options={"orientation": "horizontal", "xField": "hostname", "showValue": "auto"}))
    panels.append(panel(lay, "timeseries", "Job events over time", ES_EVENTS,
                        [es("A", Q_JOB_STATES, [{"id": "1", "type": "count"}],
                            [{"id": "3", "type": "terms", "field": "event",
                              "settings": {"size": "20", "order": "desc", "orderBy": "_count", "min_doc_count": "1"}},
                             {"id": "2", "type": "date_histogram", "field": "@timestamp",
                              "settings": {"interval": "auto"}}])], 24, 9,
                        defaults={"custom": {"drawStyle": "bars", "stacking": {"mode": "normal"},
                                             "fillOpacity": 80}}))
    failed_fields = ["@timestamp", "wf", "job_id", "exitcode", "hostname", "site", "jobtype", "xwf_id"]
    panels.append(panel(lay, "table", "Failed job instances", ES_COMPOSITE,
                        [es_raw("A", Q_FAILED_COMPOSITE, ES_COMPOSITE)], 24, 9,
                        description="Composite events (job_inst.composite) with a non-zero exit code.",
                        transformations=[organize(failed_fields, {"wf": "workflow", "job_id": "job",
                                                                  "exitcode": "exit code", "hostname": "host"})]))
    inv_fields = ["@timestamp", "transformation", "exitcode", "dur", "job_id", "task_id", "xwf_id"]
    panels.append(panel(lay, "table", "Failed invocations", ES_EVENTS, [es_raw("A", Q_FAILED_INV)], 24, 8,
                        transformations=[organize(inv_fields, {"exitcode": "exit code", "dur": "duration (s)"})]))
    panels.append(panel(lay, "table", "Durations per transformation", ES_EVENTS,
                        [es("A", Q_INV,
                            [{"id": "1", "type": "count"}, {"id": "3", "type": "avg", "field": "dur"},
                             {"id": "4", "type": "max", "field": "dur"}, {"id": "5", "type": "sum", "field": "dur"},
                             {"id": "6", "type": "avg", "field": "remote_cpu_time"}],
                            [{"id": "2", "type": "terms", "field": "transformation",
                              "settings": {"size": "50", "order": "desc", "orderBy": "5", "min_doc_count": "1"}}])],
                        24, 10, defaults={"decimals": 3}))
    panels.extend(PROGRESS.es_panels(sys.modules[__name__], lay))
    panels.append(state_timeline(lay, "Job instances (Gantt)", ES_EVENTS, es_raw("A", Q_JOB_STATES, size=5000),
                                 "job_id", ["@timestamp", "job_id", "event"], EVENT_COLOURS,
                                 "One row per job, coloured by its latest job event over time."))
    variables = [{
        "name": "xwf_id", "label": "Workflow", "type": "query", "datasource": ES_EVENTS,
        "query": json.dumps({"find": "terms", "field": "xwf_id", "query": 'event:"stampede.xwf.start"'}),
        "definition": json.dumps({"find": "terms", "field": "xwf_id", "query": 'event:"stampede.xwf.start"'}),
        "refresh": 2, "multi": False, "includeAll": True, "allValue": "*",
        "current": {"text": "All", "value": "$__all"}, "sort": 0,
    }]
    return dashboard("pegasus-stampede-events", "Pegasus workflows (events)",
                     "Stampede events indexed by Logstash: pegasus-events-* and pegasus-composite-*.",
                     panels, variables)


DASHBOARDS = {"stampede-db.json": stampede_db, "stampede-events.json": stampede_events}


def render(build: Any) -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, build in DASHBOARDS.items():
        path = OUT / name
        text = render(build)
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date (run {Path(__file__).name}): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
