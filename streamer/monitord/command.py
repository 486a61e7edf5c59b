"""`streamer monitord [OPTIONS] DAGMAN_OUT`: run as pegasus-monitord runs."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamer.endpoints.layers.spooling import DEFAULT_DRAIN_TIMEOUT
from streamer.config.settings import ConfigError, EndpointSpec
from streamer.config.command import dest_url
from streamer.monitor.parsers.dagman import Finished, Pid, classify
from streamer.monitor.submitdir import workflow_db_url
from streamer.util.runtime import log_to, run
from streamer.util.urls import EndpointURL, mask
from streamer.monitord import files, options, properties, stats
from streamer.util.exitcodes import Exit
from streamer.util.tail import OnChange, Tail

if TYPE_CHECKING:
    from streamer.run.wiring import Routed

log = logging.getLogger("streamer.monitord")

LEVELS = [logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG]
DAGMAN_GONE = Exit.DAGMAN_GONE
"""monitord's exit code when DAGMan died without writing its exit line."""
WATCH_INTERVAL = 2.0
SCAN_READ = 1 << 20
"""What one read of the dagman.out takes while watching for DAGMan's pid and exit line."""


@dataclass
class Plan:
    """Everything a run needs, resolved from the options and the properties."""

    opts: options.Options
    dagman_out: Path
    run_dir: Path
    props: properties.Properties
    endpoints: list[EndpointSpec] = field(default_factory=list)
    notifications: bool = True
    notifications_max: int = 10
    notifications_timeout: int = 0
    master_url: EndpointURL | None = None
    bindir: str | None = None
    no_events: bool = False
    store_stdout: bool = True
    timezone: str | None = None
    """`pegasus.monitord.timezone` (streamer's own property): the zone of DAGMan's times, else the rule's."""


# ---------------------------------------------------------------- logging

def setup_logging(run_dir: Path, opts: options.Options) -> None:
    """monitord's logging: INFO by default; -v for DEBUG; monitord.log in daemon mode, the console in replay."""
    level = logging.INFO if opts.verbose <= 0 else logging.DEBUG
    log_path = run_dir / files.LOG_FILE
    stream: Any = sys.stderr
    if opts.replay:
        files.rotate(log_path)  # as monitord -r: pegasus-statistics must not read an old log as this run's
    elif opts.condor_daemon and not files.stderr_is(log_path):
        files.rotate(log_path)
        stream = open(log_path, "a", buffering=1, encoding="utf-8")
    log_to(stream, level, "%(asctime)s:%(name)s:%(levelname)s: %(message)s")


def _shift_level(step: int) -> None:
    root = logging.getLogger()
    current = root.getEffectiveLevel()
    index = LEVELS.index(current) if current in LEVELS else 2
    root.setLevel(LEVELS[max(0, min(len(LEVELS) - 1, index + step))])
    log.warning("log level now %s", logging.getLevelName(root.getEffectiveLevel()))


# ---------------------------------------------------------------- plan

def make_plan(argv: list[str], *, home: str | None = None) -> Plan | int:
    """Options + properties -> Plan, or an exit code (usage problems print and return 1, as monitord)."""
    defines, argv = properties.split_defines(argv)
    opts = options.parse(argv)
    if not opts.dagman_out:
        options.build_parser().print_usage(sys.stderr)
        sys.stderr.write("streamer monitord: error: the workflow's *.dagman.out is required\n")
        return 1
    dagman_out = Path(opts.dagman_out).absolute()
    if not dagman_out.name.endswith(".dagman.out"):
        sys.stderr.write(f"streamer monitord: error: {opts.dagman_out}: not a DAGMan log (*.dagman.out)\n")
        return 1
    run_dir = dagman_out.parent
    if not run_dir.is_dir():
        sys.stderr.write(f"streamer monitord: error: run directory {run_dir} does not exist\n")
        return 1
    from streamer.monitor.parsers import braindump

    try:
        params = braindump.load(run_dir)
    except braindump.BraindumpError as exc:
        sys.stderr.write(f"streamer monitord: error: {exc}\n")
        return 1
    home = home if home is not None else os.environ.get("HOME")
    if opts.conf and not os.path.isabs(opts.conf) and not os.path.exists(opts.conf):
        opts.conf = str(run_dir / opts.conf)  # monitord reads it after changing into the run directory
    props = properties.discover(opts.conf, run_dir, params, defines, home=home)
    added = props.get("pegasus.monitord.arguments")
    if added and added.strip():
        opts = options.parse(argv + added.split())
    plan = Plan(opts=opts, dagman_out=dagman_out, run_dir=run_dir, props=props, bindir=params.get("bindir"))
    plan.no_events = plan_no_events(plan)
    plan.store_stdout = not opts.skip_stdout and not _lenient(
        plan, lambda: props.boolean("pegasus.monitord.stdout.disable.parsing", False), False)
    if props.get("pegasus.monitord.fast_start") is not None:
        opts.ignored.append("pegasus.monitord.fast_start: streamer always catches up with the logs before it "
                            "waits for more; the property is ignored")
    if opts.jsd is not None and os.path.isabs(opts.jsd) and opts.recursive:
        opts.recursive = False  # monitord: one absolute jobstate file cannot serve sub-workflows
        opts.ignored.append(f"-j/--job {opts.jsd} is an absolute filename: sub-workflows are not followed "
                            "(as monitord)")
    plan.timezone = _timezone(plan)
    _endpoints(plan, params)
    _notifications(plan)
    if not plan.no_events:
        plan.master_url = properties.master_url(props, home)
    return plan


def plan_no_events(plan: Plan) -> bool:
    return plan.opts.no_events or not _lenient(plan, lambda: plan.props.boolean("pegasus.monitord.events", True),
                                               True)


def _endpoints(plan: Plan, params: dict[str, str]) -> None:
    opts, props = plan.opts, plan.props
    if opts.dest is not None and opts.no_events:
        plan.opts.ignored.append("--dest and --no-events conflict (monitord refuses both): --no-events wins")
    if plan.no_events:
        return
    default = workflow_db_url(plan.run_dir, plan.dagman_out, params.get("dag"))
    url = dest_url(opts.dest) if opts.dest else properties.workflow_url(props, default)
    main = EndpointSpec(url=url)
    main.options.update(properties.timeout_options(props, None, url.scheme))
    plan.endpoints = [main] + properties.extra_endpoints(props)
    encoding = opts.encoding or _lenient(plan, lambda: properties.encoding(props), None)
    for spec in plan.endpoints:
        if encoding and spec.url.scheme == "file" and "encoding" not in spec.url.options:
            spec.options.setdefault("encoding", encoding)
        if spec.url.kind == "amqp" and "drain_timeout" not in spec.url.options:
            # as monitord: pegasus-remove's signals never cut short the flush of what the broker has not taken
            # yet (a command's run gives up on a broker away at a signal, keeping its spool for the next run)
            spec.options.setdefault("drain_timeout", DEFAULT_DRAIN_TIMEOUT)


def _lenient(plan: Plan, read: Any, default: Any) -> Any:
    """A property value, or `default` with a log line naming FILE:LINE when it is malformed."""
    try:
        return read()
    except ConfigError as exc:
        plan.opts.ignored.append(f"{exc}; using the default")
        return default


def _timezone(plan: Plan) -> str | None:
    """`pegasus.monitord.timezone`, else None (`monitor/zones.py`: the offset braindump.yml records); a zone
    that names none is logged and ignored (an unattended monitor does not die at start)."""
    from ..monitor.zones import ZoneError, parse_zone

    value = (plan.props.get("pegasus.monitord.timezone") or "").strip()
    if not value:
        return None
    try:
        parse_zone(value)
    except ZoneError as exc:
        plan.opts.ignored.append(f"pegasus.monitord.timezone: {exc}; reading DAGMan's times in the offset "
                                 "braindump.yml records")
        return None
    return value


def _notifications(plan: Plan) -> None:
    opts, props = plan.opts, plan.props
    maximum = opts.notifications_max if opts.notifications_max is not None else \
        _lenient(plan, lambda: props.integer("pegasus.monitord.notifications.max"), None)
    timeout = opts.notifications_timeout if opts.notifications_timeout is not None else \
        _lenient(plan, lambda: props.integer("pegasus.monitord.notifications.timeout"), None)
    plan.notifications_max = 10 if maximum is None else maximum
    plan.notifications_timeout = timeout or 0
    enabled = _lenient(plan, lambda: props.boolean("pegasus.monitord.notifications", True), True)
    plan.notifications = opts.notifications and not opts.replay and plan.notifications_max > 0 and enabled


def engine_options(plan: Plan) -> Any:
    """What -a, -j, -o, --skip-stdout, --keep-state and -S change in the monitor engine."""
    from streamer.monitor.engineopts import JOBSTATE_LOG, EngineOptions

    opts = plan.opts
    return EngineOptions(adjust=opts.adjust, jobstate_name=opts.jsd or JOBSTATE_LOG, output_dir=opts.output_dir,
                         store_stdout=plan.store_stdout, keep_state=opts.keep_state,
                         line_delay=(opts.millisleep or 0) / 1000.0)


# ---------------------------------------------------------------- run

class Watch:
    """Signals and DAGMan's pid while a run lasts."""

    def __init__(self, source: Any, dagman_out: Path, follow: bool) -> None:
        self.source = source
        self.dagman_out = dagman_out
        self.follow = follow
        self.signal: int | None = None
        self.dagman_gone = False
        self._tail = Tail(dagman_out, on_change=OnChange.RESTART)
        self._pid: int | None = None
        self._exited = False
        self._last_size = -1

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for signum, handler in ((signal.SIGINT, self._stop), (signal.SIGTERM, self._stop),
                                (signal.SIGHUP, self._ignore), (signal.SIGABRT, self._ignore),
                                (signal.SIGUSR1, lambda s: _shift_level(+1)),
                                (signal.SIGUSR2, lambda s: _shift_level(-1))):
            loop.add_signal_handler(signum, handler, signum)

    def _stop(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self.signal is not None:
            log.warning("%s: already finishing (reading what DAGMan wrote, delivering it); not cut short", name)
            return
        self.signal = signum
        log.warning("graceful exit on signal %s: reading to the end of what DAGMan wrote, delivering every "
                    "event, saving the resume state", name)
        self.finish()

    def _ignore(self, signum: int) -> None:
        log.warning("ignoring signal %s", signal.Signals(signum).name)  # seen at any level SIGUSR1/2 left

    def finish(self) -> None:
        """Read the logs to their current end, then stop (rather than waiting for more)."""
        self.source.follow = False

    def _scan(self) -> int:
        try:
            while True:
                data = self._tail.read(SCAN_READ).data  # a FIFO or /dev/zero is no log: refused
                if not data:
                    break
                self._lines(data)
        except OSError:
            return -1
        return self._tail.offset

    def _lines(self, data: bytes) -> None:
        for raw in data.split(b"\n"):
            if b"PID =" in raw or b"EXITING WITH STATUS" in raw:  # the only lines that can say either
                match classify(raw.decode("utf-8", "replace").rstrip()):
                    case Pid(pid):  # DAGMan (re)started: running until its exit line
                        self._pid, self._exited = pid, False
                    case Finished():
                        self._exited = True

    async def dagman(self) -> None:
        """Follow mode: when DAGMan's pid is gone without its exit line and the log stopped growing, finish."""
        if not self.follow:
            return
        while self.source.follow:
            await asyncio.sleep(WATCH_INTERVAL)
            size = await asyncio.to_thread(self._scan)
            if self._pid is None or self._exited or files.pid_alive(self._pid):
                self._last_size = -1
                continue
            if size == self._last_size:
                log.critical("DAGMan is gone! (pid %d is not running and %s has no exit line); finishing what "
                             "it wrote", self._pid, self.dagman_out.name)
                self.dagman_gone = True
                self.finish()
                return
            self._last_size = size


async def run_plan(plan: Plan) -> int:
    from streamer.monitor.source import WorkflowSource
    from streamer.run.pipeline import RunOptions
    from streamer.run.summary import print_summary
    from streamer.run.workflow import WorkflowRun

    opts = plan.opts
    out_dir = Path(opts.output_dir) if opts.output_dir else plan.run_dir
    if opts.output_dir:
        out_dir = out_dir if out_dir.is_absolute() else plan.run_dir / out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
    state_path = out_dir / "streamer.state.json" if opts.output_dir else None
    follow = not opts.replay
    source = WorkflowSource(plan.dagman_out, follow=follow, recursive=opts.recursive, timezone=plan.timezone,
                            state_path=state_path, engine=engine_options(plan))
    source.poll_max = 0.2
    extra: list[Routed] = []
    notifier = None
    if plan.notifications:
        from streamer.monitord.notifier import NotificationEndpoint, bin_dir
        from streamer.monitord.notify import Matcher

        env = {}
        found = bin_dir(plan.bindir)
        if found:
            env["PEGASUS_BIN_DIR"] = found
        notifier = NotificationEndpoint(Matcher(plan.run_dir, str(plan.dagman_out)), out_dir,
                                        max_parallel=plan.notifications_max,
                                        timeout=plan.notifications_timeout, extra_env=env)
        extra.append((notifier, EndpointSpec(url=notifier.url, events=notifier.default_events)))
    if plan.master_url:
        from streamer.monitord.dashboard import dashboard_endpoint

        dashboard = dashboard_endpoint(plan.master_url, replay=opts.replay,
                                       db_url=plan.endpoints[0].url.raw if plan.endpoints else None)
        if dashboard is not None:
            extra.append(dashboard)
    for spec in plan.endpoints:
        log.info("endpoint %s%s", spec.url.masked, f" [{spec.events}]" if spec.events else "")
    if plan.notifications:
        log.info("notifications on (at most %d at once, timeout %s)", plan.notifications_max,
                 f"{plan.notifications_timeout} s" if plan.notifications_timeout else "none")
    if opts.millisleep:
        log.info("using simulation delay of %d ms per dagman.out line", opts.millisleep)
    workflow = WorkflowRun(source, replay=opts.replay)
    await workflow.decide(None)
    watch = Watch(source, plan.dagman_out, follow)
    watch.install()
    watcher = asyncio.create_task(watch.dagman())
    try:
        result = await workflow.run(plan.endpoints, RunOptions(progress=False, signals=False), extra=extra,
                                    ended=lambda: not watch.dagman_gone and watch.signal is None)
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    print_summary(result, _LogStream())
    if opts.db_stats:
        stats.log_db_stats(result)
    if result.exit_code != 0:
        return result.exit_code
    if watch.dagman_gone:
        return DAGMAN_GONE
    if watch.signal is not None:
        return 1
    log.info("monitord process %d exiting with 0", os.getpid())
    return 0


class _LogStream:
    """print_summary's lines as log lines."""

    def write(self, text: str) -> None:
        for line in text.splitlines():
            if line.strip():
                log.info("%s", line.strip())


def main(argv: list[str]) -> int:
    try:
        plan = make_plan(argv)
    except ConfigError as exc:
        sys.stderr.write(f"streamer monitord: error: {mask(str(exc))}\n")
        return 1
    if isinstance(plan, int):
        return plan
    os.chdir(plan.run_dir)
    setup_logging(plan.run_dir, plan.opts)
    log.info("streamer monitord starting - pid %d; properties from %s", os.getpid(),
             ", ".join(plan.props.sources) or "nowhere")
    for message in plan.opts.ignored:
        log.warning("%s", message)
    if plan.opts.condor_daemon and not plan.opts.replay:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass  # HTCondor may have made us a group leader already
    if not files.claim_pid_file(plan.run_dir, force=plan.opts.force):
        log.critical("it appears that pegasus-monitord is still running on this workflow "
                     "(%s names a live process)... exiting", files.PID_FILE)
        return files.PID_IN_USE
    try:
        files.remove_stale_done(plan.run_dir)
        try:
            return run(run_plan(plan))
        except (ConfigError, ValueError, OSError) as exc:
            log.error("%s", mask(str(exc)))
            return 1
    finally:
        files.release_pid_file(plan.run_dir)
