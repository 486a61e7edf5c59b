"""Panels for what pegasus-dashboard / pegasus-statistics users look for (used by build_dashboards.py).

Progress % per workflow, held jobs with their hold reasons, failing and
retried jobs, CPU (and, from the events, memory) per transformation,
integrity metrics and a sub-workflow drill-down. Kept apart from
build_dashboards.py so that each file stays one concept; the builder passes
itself in (`b`) for the panel helpers.
"""

from __future__ import annotations

from typing import Any

# ---------------------------------------------------------------- SQL (Stampede DB)

# A job's outcome is its latest instance's exit code (NULL: still running); a job
# without any instance has not started. As pegasus-statistics counts jobs.
SQL_PROGRESS = """\
WITH last AS (
  SELECT DISTINCT ON (ji.job_id) ji.job_id, ji.exitcode
  FROM job_instance ji
  ORDER BY ji.job_id, ji.job_submit_seq DESC
)
SELECT
  w.dax_label || ' (' || left(w.wf_uuid, 8) || ')' AS "workflow",
  count(j.job_id) AS "jobs",
  count(*) FILTER (WHERE last.exitcode = 0) AS "succeeded",
  count(*) FILTER (WHERE last.exitcode <> 0) AS "failed",
  count(*) FILTER (WHERE last.job_id IS NOT NULL AND last.exitcode IS NULL) AS "running",
  count(*) FILTER (WHERE last.job_id IS NULL) AS "not started",
  round(100.0 * count(*) FILTER (WHERE last.exitcode = 0) / greatest(count(j.job_id), 1), 2) AS "% done"
FROM workflow w
JOIN job j ON j.wf_id = w.wf_id
LEFT JOIN last ON last.job_id = j.job_id
WHERE w.wf_id IN ($workflow)
GROUP BY w.wf_id
ORDER BY w.timestamp DESC, 1"""

SQL_HELD = """\
SELECT
  to_timestamp(js.timestamp) AS "time",
  w.dax_label AS "workflow",
  j.exec_job_id AS "job",
  ji.job_submit_seq AS "try",
  btrim(js.reason) AS "hold reason",
  CASE WHEN EXISTS (
    SELECT 1 FROM jobstate r
    WHERE r.job_instance_id = js.job_instance_id AND r.state = 'JOB_RELEASED'
      AND r.jobstate_submit_seq > js.jobstate_submit_seq
  ) THEN 'released' ELSE 'held' END AS "then",
  w.wf_uuid AS "uuid"
FROM jobstate js
JOIN job_instance ji ON ji.job_instance_id = js.job_instance_id
JOIN job j ON j.job_id = ji.job_id
JOIN workflow w ON w.wf_id = j.wf_id
WHERE js.state = 'JOB_HELD' AND $__unixEpochFilter(js.timestamp) AND j.wf_id IN ($workflow)
ORDER BY 1 DESC, 3
LIMIT 500"""

SQL_RETRIED = """\
SELECT
  w.dax_label AS "workflow",
  j.exec_job_id AS "job",
  count(*) AS "tries",
  count(*) FILTER (WHERE ji.exitcode <> 0) AS "failed tries",
  (array_agg(ji.exitcode ORDER BY ji.job_submit_seq DESC))[1] AS "last exit code",
  CASE
    WHEN (array_agg(ji.exitcode ORDER BY ji.job_submit_seq DESC))[1] = 0 THEN 'succeeded'
    WHEN (array_agg(ji.exitcode ORDER BY ji.job_submit_seq DESC))[1] IS NULL THEN 'running'
    ELSE 'failed'
  END AS "outcome",
  j.type_desc AS "type",
  w.wf_uuid AS "uuid"
FROM job_instance ji
JOIN job j ON j.job_id = ji.job_id
JOIN workflow w ON w.wf_id = j.wf_id
WHERE j.wf_id IN ($workflow)
GROUP BY w.wf_id, j.job_id
HAVING count(*) > 1 OR count(*) FILTER (WHERE ji.exitcode <> 0) > 0
ORDER BY "failed tries" DESC, "tries" DESC, 2"""

SQL_CPU = """\
SELECT
  i.transformation AS "transformation",
  count(*) AS "invocations",
  round(sum(i.remote_cpu_time), 3) AS "cpu (s)",
  round(sum(i.remote_duration), 3) AS "wall (s)",
  round(100.0 * sum(i.remote_cpu_time) / nullif(sum(i.remote_duration), 0), 1) AS "cpu %"
FROM invocation i
WHERE $__unixEpochFilter(i.start_time) AND i.wf_id IN ($workflow) AND i.remote_cpu_time IS NOT NULL
GROUP BY 1
ORDER BY "cpu (s)" DESC, 1"""

SQL_INTEGRITY = """\
SELECT
  ig.type AS "type",
  coalesce(ig.file_type::text, '-') AS "files",
  count(DISTINCT ig.job_instance_id) AS "job instances",
  sum(ig.count) AS "checksums",
  round(sum(ig.duration), 3) AS "duration (s)"
FROM integrity ig
WHERE ig.wf_id IN ($workflow)
GROUP BY 1, 2
ORDER BY 1, 2"""

SQL_SUBWORKFLOWS = """\
WITH latest AS (
  SELECT DISTINCT ON (ws.wf_id) ws.wf_id, ws.state, ws.status
  FROM workflowstate ws
  ORDER BY ws.wf_id, ws.timestamp DESC, ws.state DESC
), runner AS (
  SELECT DISTINCT ON (ji.subwf_id) ji.subwf_id, j.exec_job_id, ji.exitcode
  FROM job_instance ji JOIN job j ON j.job_id = ji.job_id
  WHERE ji.subwf_id IS NOT NULL
  ORDER BY ji.subwf_id, ji.job_submit_seq DESC
)
SELECT
  p.dax_label AS "parent",
  s.dax_label AS "sub-workflow",
  runner.exec_job_id AS "job",
  CASE  -- its own state, else the outcome of the job that ran it
    WHEN latest.state = 'WORKFLOW_STARTED' THEN 'running'
    WHEN latest.state IS NOT NULL AND latest.status = 0 THEN 'succeeded'
    WHEN latest.state IS NOT NULL THEN 'failed'
    WHEN runner.subwf_id IS NULL THEN 'planned'
    WHEN runner.exitcode IS NULL THEN 'running'
    WHEN runner.exitcode = 0 THEN 'succeeded'
    ELSE 'failed'
  END AS "status",
  (SELECT count(*) FROM job sj WHERE sj.wf_id = s.wf_id) AS "jobs",
  s.wf_id AS "wf_id",
  s.wf_uuid AS "uuid"
FROM workflow s
JOIN workflow p ON p.wf_id = s.parent_wf_id
LEFT JOIN latest ON latest.wf_id = s.wf_id
LEFT JOIN runner ON runner.subwf_id = s.wf_id
WHERE p.wf_id IN ($workflow) OR s.wf_id IN ($workflow)
ORDER BY p.wf_id, s.wf_id"""

# ---------------------------------------------------------------- Lucene (Elasticsearch)

Q_HELD = 'event:"stampede.job_inst.held.start" AND xwf_id:$xwf_id'
Q_INV_USAGE = 'event:"stampede.inv.end" AND xwf_id:$xwf_id'
Q_INTEGRITY = 'event:"stampede.int.metric" AND xwf_id:$xwf_id'
Q_SUBWORKFLOWS = 'event:"stampede.wf.plan" AND parent_xwf_id:* AND (xwf_id:$xwf_id OR parent_xwf_id:$xwf_id)'
Q_RETRIED = 'event:"stampede.job_inst.submit.start" AND xwf_id:$xwf_id'

DRILL_DOWN_DB = "/d/pegasus-stampede-db?var-workflow=${__data.fields.wf_id}&${__url_time_range}"
DRILL_DOWN_ES = "/d/pegasus-stampede-events?var-xwf_id=${__data.fields.xwf_id}&${__url_time_range}"


def _link(column: str, title: str, url: str) -> dict[str, Any]:
    return {"matcher": {"id": "byName", "options": column},
            "properties": [{"id": "links", "value": [{"title": title, "url": url}]}]}


def _terms(field: str, order_by: str = "_count", size: str = "50") -> dict[str, Any]:
    return {"id": "2", "type": "terms", "field": field,
            "settings": {"size": size, "order": "desc", "orderBy": order_by, "min_doc_count": "1"}}


def db_panels(b: Any, lay: Any) -> list[dict[str, Any]]:
    """Panels over the Stampede DB (one SQL target each, checked on PostgreSQL by the deploy tests)."""
    pg = b.PG
    return [
        b.panel(lay, "barchart", "Progress per workflow", pg, [b.sql("A", SQL_PROGRESS)], 12, 8,
                description="Jobs whose latest try succeeded, out of the workflow's jobs (pegasus-status's %DONE).",
                options={"orientation": "horizontal", "xField": "workflow", "showValue": "always"},
                defaults={"unit": "percent", "min": 0, "max": 100, "decimals": 1},
                transformations=[b.filter_fields(["workflow", "% done"])]),
        b.panel(lay, "table", "Jobs per workflow", pg, [b.sql("A", SQL_PROGRESS)], 12, 8,
                description="Succeeded, failed, running and not started jobs per workflow."),
        b.panel(lay, "table", "Held jobs", pg, [b.sql("A", SQL_HELD)], 24, 8,
                description="JOB_HELD states with HTCondor's hold reason, and whether the job was released."),
        b.panel(lay, "table", "Failing and retried jobs", pg, [b.sql("A", SQL_RETRIED)], 24, 8,
                description="Jobs with more than one try or a failed try: tries, failures, final outcome."),
        b.panel(lay, "table", "CPU per transformation", pg, [b.sql("A", SQL_CPU)], 12, 8,
                description="Kickstart CPU time against wall time per transformation (memory: see the events "
                            "dashboard; the Stampede DB has no memory column)."),
        b.panel(lay, "table", "Integrity checks", pg, [b.sql("A", SQL_INTEGRITY)], 12, 8,
                description="Checksums computed and verified (pegasus-integrity), files and time spent."),
        b.panel(lay, "table", "Sub-workflows", pg, [b.sql("A", SQL_SUBWORKFLOWS)], 24, 8,
                description="Sub-workflows of the selected workflows; click one to show only it.",
                overrides=[_link("sub-workflow", "Show this sub-workflow", DRILL_DOWN_DB)]),
    ]


def es_panels(b: Any, lay: Any) -> list[dict[str, Any]]:
    """Panels over the Elasticsearch event indices."""
    held = ["@timestamp", "job_id", "job_inst_id", "reason", "sched_id", "xwf_id"]
    return [
        b.panel(lay, "table", "Held jobs", b.ES_EVENTS, [b.es_raw("A", Q_HELD)], 24, 8,
                description="job_inst.held.start events with HTCondor's hold reason.",
                transformations=[b.organize(held, {"job_id": "job", "job_inst_id": "instance",
                                                   "reason": "hold reason"})]),
        b.panel(lay, "table", "Job tries", b.ES_EVENTS,
                [b.es("A", Q_RETRIED, [{"id": "1", "type": "count"}], [_terms("job_id", size="100")])], 12, 8,
                description="Submissions per job, most first: a job above 1 was retried."),
        b.panel(lay, "table", "Memory and CPU per transformation", b.ES_EVENTS,
                [b.es("A", Q_INV_USAGE,
                      [{"id": "1", "type": "count"}, {"id": "3", "type": "max", "field": "maxrss"},
                       {"id": "4", "type": "avg", "field": "maxrss"}, {"id": "5", "type": "avg", "field": "avg_cpu"},
                       {"id": "6", "type": "sum", "field": "remote_cpu_time"}],
                      [_terms("transformation", order_by="3")])], 12, 8,
                description="Kickstart maxrss (KB) and CPU utilisation (avg_cpu) of invocations.",
                defaults={"decimals": 2}),
        b.panel(lay, "table", "Integrity metrics", b.ES_EVENTS,
                [b.es("A", Q_INTEGRITY,
                      [{"id": "1", "type": "count"}, {"id": "3", "type": "sum", "field": "count"},
                       {"id": "4", "type": "sum", "field": "duration"}],
                      [_terms("type"), {"id": "5", "type": "terms", "field": "file_type",
                                        "settings": {"size": "5", "order": "desc", "orderBy": "_count",
                                                     "min_doc_count": "1"}}])], 12, 8,
                description="int.metric events: checksums computed or checked, per kind of file."),
        b.panel(lay, "table", "Sub-workflows", b.ES_EVENTS, [b.es_raw("A", Q_SUBWORKFLOWS)], 12, 8,
                description="Plans of sub-workflows (wf.plan with a parent); click one to show only it.",
                transformations=[b.organize(["@timestamp", "dax_label", "xwf_id", "parent_xwf_id", "submit_dir"],
                                            {"dax_label": "sub-workflow"})],
                overrides=[_link("xwf_id", "Show this sub-workflow", DRILL_DOWN_ES)]),
    ]
