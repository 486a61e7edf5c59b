"""`streamer serve` settings: the `[serve]` table of streamer.toml, then the command line.

    [serve]
    watch = ["/home/pegasus/runs"]          # roots searched for new workflows (inotify)
    master_db = "sqlite:////home/pegasus/.pegasus/workflow.db"   # also follow workflows registered here
    workflow_dest = ["sqlite"]              # per-workflow endpoints (templates); "sqlite" = monitord's DB
    jobstate = true                         # write each workflow's jobstate.log
    state_dir = "/var/lib/streamer/serve"   # the list of followed workflows, the lock
    timezone = "UTC"

    [[endpoint]]                            # shared by every workflow: one connection each
    url = "amqp://streamer:PASS@broker/pegasus/workflows"

Workflow templates may use `{submit_dir}`, `{dag}` (the .dag file's base name without `.dag`) and
`{wf_uuid}`; `sqlite` stands for `sqlite:///{submit_dir}/{dag}.stampede.db` (monitord's default).
"""

from __future__ import annotations

import logging
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamer.config.command import collect_endpoints, dest_url
from streamer.config.statedir import user_state_dir
from streamer.config.settings import ConfigError, EndpointSpec, Settings, load_toml
from streamer.util import safenames
from streamer.util.urls import EndpointURL, mask

log = logging.getLogger("streamer.serve")

SQLITE_DEFAULT = "sqlite"
KNOWN_KEYS = {"watch", "metrics", "master_db", "master_poll", "workflow_dest", "jobstate", "state_dir", "timezone",
              "parser", "recursive"}


@dataclass
class ServeConfig:
    """Everything `serve` reads at start and again on SIGHUP."""

    roots: list[Path] = field(default_factory=list)
    shared: list[EndpointSpec] = field(default_factory=list)
    workflow_dest: list[str] = field(default_factory=lambda: [SQLITE_DEFAULT])
    master_db: EndpointURL | None = None
    master_poll: float = 5.0
    jobstate: bool = True
    recursive: bool = True
    state_dir: Path | None = None
    timezone: str | None = None
    parser: str = "thread"
    on_error: str = "stop"
    metrics: str | None = None
    """HOST:PORT of the Prometheus exporter (`--metrics`; read at start, not on SIGHUP)."""
    source: str | None = None
    """The config file read (None: command line only)."""

    def endpoints_key(self) -> tuple[Any, ...]:
        """What the running workflows' pipelines depend on: a change restarts them (SIGHUP)."""
        return (tuple((s.url, s.events, s.buffer, s.batch, tuple(sorted(map(str, s.options.items()))))
                      for s in self.shared), tuple(self.workflow_dest), self.jobstate, self.recursive,
                self.timezone, self.parser, self.on_error)

    def workflow_specs(self, submit_dir: str, dag: str, wf_uuid: str | None, default_db: str) -> list[EndpointSpec]:
        """The per-workflow endpoints of one workflow, templates filled in.

        The values come from the workflow's braindump (untrusted): a template whose value would leave its
        directory or change the URL (`safenames`) is refused for this workflow, with an ERROR naming it;
        the workflow's other endpoints go on."""
        specs = []
        values = {"submit_dir": submit_dir, "dag": dag, "wf_uuid": wf_uuid or "unknown"}
        for template in self.workflow_dest:
            if template.strip() == SQLITE_DEFAULT:
                specs.append(EndpointSpec(url=EndpointURL.parse(default_db)))
                continue
            try:
                used = {name for _, name, _, _ in string.Formatter().parse(template) if name}
                for name in sorted(used & set(values)):
                    check = safenames.directory if name == "submit_dir" else safenames.component
                    check(values[name], name)
                url = template.format(**values)
            except safenames.UnsafeName as exc:
                log.error("%s: workflow_dest %s refused for this workflow: %s (its other endpoints go on)",
                          submit_dir, mask(template), exc)
                continue
            except (KeyError, IndexError, ValueError) as exc:
                raise ConfigError(f"workflow_dest {template!r}: bad template ({exc}); use {{submit_dir}}, "
                                  "{dag} or {wf_uuid}") from None
            specs.append(EndpointSpec(url=dest_url(url)))
        return specs

    def default_state_dir(self) -> Path:
        if self.state_dir is not None:
            return self.state_dir
        return user_state_dir() / "serve"


def load_serve_config(args: Any) -> ServeConfig:
    """Read `--config` (its `[serve]` table and `[[endpoint]]`s) and apply the command line over it."""
    config = ServeConfig()
    table: dict[str, Any] = {}
    if getattr(args, "config", None):
        config.source = str(args.config)
        table = _serve_table(args.config)
    settings: Settings = collect_endpoints(args)  # [[endpoint]]s, --conf, --dest, --events, --on-error
    config.shared = settings.endpoints
    config.on_error = settings.on_error
    where = config.source or "command line"
    roots = [*_strings(table.get("watch", []), where, "watch"), *(getattr(args, "watch", None) or [])]
    config.roots = [Path(r).expanduser().resolve() for r in roots]
    if "workflow_dest" in table:
        config.workflow_dest = _strings(table["workflow_dest"], where, "workflow_dest")
    if getattr(args, "workflow_dest", None):
        config.workflow_dest = list(args.workflow_dest)
    if getattr(args, "no_workflow_dest", False):
        config.workflow_dest = []
    master_db = getattr(args, "master_db", None) or table.get("master_db")
    config.master_db = EndpointURL.parse(str(master_db)) if master_db else None
    config.master_poll = float(getattr(args, "master_poll", None) or table.get("master_poll", 5.0))
    config.jobstate = bool(table.get("jobstate", True)) and not getattr(args, "no_jobstate", False)
    config.recursive = bool(table.get("recursive", True)) and not getattr(args, "no_recursive", False)
    state_dir = getattr(args, "state_dir", None) or table.get("state_dir")
    config.state_dir = Path(state_dir).expanduser().resolve() if state_dir else None
    config.timezone = getattr(args, "timezone", None) or table.get("timezone") or settings.timezone
    if config.timezone:
        from ..monitor.zones import ZoneError, parse_zone

        try:
            parse_zone(str(config.timezone))
        except ZoneError as exc:
            raise ConfigError(f"{where}: timezone: {exc}") from None
    config.metrics = getattr(args, "metrics", None) or table.get("metrics")
    config.parser = getattr(args, "parser", None) or table.get("parser", "thread")
    if config.parser not in ("thread", "process", "auto"):
        raise ConfigError(f"{where}: parser must be thread, process or auto, not {config.parser!r}")
    if not config.roots and not config.master_db:
        raise ConfigError("nothing to serve: give --watch DIR (or watch = [...] in [serve]) or --master-db URL")
    for root in config.roots:
        if not root.is_dir():
            raise ConfigError(f"{where}: watch root {root}: no such directory")
    return config


def _serve_table(path: str | Path) -> dict[str, Any]:
    load_toml(path)  # the file's own errors (name and line), the [[endpoint]] checks
    data = tomllib.loads(Path(path).read_text())
    table = data.get("serve", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [serve] must be a table")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{path}: [serve]: unknown key(s) {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(KNOWN_KEYS))})")
    return table


def _strings(value: Any, where: str, key: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: [serve] {key} must be a string or a list of strings")
    return list(value)
