"""pegasus-dashboard shows a workflow monitored by `streamer monitord` as it shows it monitored by the real
`pegasus-monitord`: headless Chromium loads the workflow list, the workflow page, a failed job's page and the
statistics page (each of its four sections opened in turn) from two pegasus-service instances (pegasus-wms 5.1.3,
on 127.0.0.1), one per monitor's HOME, and their visible text (`innerText`, once the pages' AJAX-filled tables are
drawn) must be the same (times, ports, the run directory and database ids aside). The pages' CDN files (jQuery,
Bootstrap, DataTables, Font Awesome, Highcharts...) are rebuilt from the npm registry (tests/support/cdnassets.py) and
answered to Chromium through the DevTools protocol (tests/support/headless.py), so the tables are populated offline.

Screenshots are kept in `$STREAMER_ARTIFACTS/dashboard/` (default: the system temp dir), outside the repository.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from streamer.synth import generate
from tests.support import cdnassets
from tests.conftest import unavailable
from tests.support.headless import Browser

USER = "dashtest"
SERVER = """\
# pegasus-service for one test HOME: the dashboard lists the workflows of the user it runs as, from that user's
# ~/.pegasus/workflow.db. The test runs as any uid (root included, which the dashboard refuses), so the user is
# a stand-in named {user!r} whose home is $HOME.
import os, sys
import Pegasus.user as user

def me(*_):
    return user.User(os.getuid(), os.getgid(), {user!r}, os.environ["HOME"])

user.get_user_by_uid = me
user.get_user_by_username = me
from Pegasus.service.server import run
run(host="127.0.0.1", port=int(sys.argv[1]), debug=False, verbose=20)
"""
_TIME = re.compile(r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?(\.\d+)?([+-]\d\d:?\d\d|Z| ?[A-Z]{2,4})?\b|"
                   r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun),? [A-Z][a-z]{2} \d+,? \d{4}[ ,]*\d\d?:\d\d(:\d\d)?( [AP]M)?|"
                   r"\b[A-Z][a-z]{2} \d\d?, \d{4},? \d\d?:\d\d(:\d\d)? ?[AP]M\b")


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        unavailable("Debian chromium is not installed (scripts/test.sh installs it)")
    if importlib.util.find_spec("Pegasus.service") is None:
        unavailable("pegasus-wms (pegasus-service) is not installed")
    return found


@pytest.fixture(scope="module")
def cdn() -> dict[str, tuple[bytes, str]]:
    """The pages' CDN files, checked against the URLs and SRI hashes of pegasus-service's templates."""
    import Pegasus.service

    try:
        served = cdnassets.assets()
    except cdnassets.Unavailable as error:
        unavailable(f"the dashboard's CDN files could not be fetched from npm: {error}")
    problems = cdnassets.check_integrity(
        served, cdnassets.template_assets(Path(Pegasus.service.__file__).parent / "templates"))
    assert not problems, "\n".join(problems)
    return served


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch_ok(url: str) -> bool:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            return response.status == 200
    except OSError:
        return False


def visible_text(text: str, replace: dict[str, str]) -> list[str]:
    for old, new in replace.items():
        text = text.replace(old, new)
    text = _TIME.sub("<TIME>", text)
    return [line for line in (" ".join(part.split()) for part in text.splitlines()) if line]


# what a user opens on a page to see all of it: (the tab or accordion header clicked, the panel it shows); each
# panel's rows are fetched and drawn by the page when it opens
SECTIONS = {
    "workflow": [(f"#{tab}-tab", panel) for tab, panel in (
        ("files", "files"), ("metadata", "metadata"), ("failed-jobs", "failed_jobs"),
        ("running-jobs", "running_jobs"), ("successful-jobs", "successful_jobs"), ("failing-jobs", "failing_jobs"))],
    "statistics": [(f'[data-bs-target="#{panel}"]', panel)
                   for panel in ("job-breakdown-stats", "job-stats", "int-stats")],
}


def shown_text(browser: Browser, url: str, sections: list[tuple[str, str]]) -> str:
    """The page's visible text once drawn, then each section's after clicking it open, under `## <panel id>`."""
    parts = [browser.open(url)]
    for clicked, panel in sections:
        if not browser.evaluate(f"(e => e ? (e.click(), true) : false)(document.querySelector({clicked!r}))"):
            parts.append(f"## {panel}\n(not on the page)")
            continue
        browser.settle()
        parts.append(f"## {panel}\n" + browser.evaluate(f"document.getElementById({panel!r}).innerText"))
    return "\n".join(parts)


def ids(run_dir: Path, home: Path) -> dict:
    """What the pages show and are addressed by: the master DB's workflow (wf_id, uuid, label, submit host and
    directory), the Stampede wf_id, and the first failed job instance (job_id, job_instance_id, name, exit code)."""
    master = sqlite3.connect(home / ".pegasus" / "workflow.db")
    stampede = sqlite3.connect(next(run_dir.glob("*.stampede.db")))
    try:
        registered = master.execute(
            "SELECT wf_id, wf_uuid, dax_label, submit_hostname, submit_dir FROM master_workflow").fetchall()
        assert len(registered) == 1, f"{home}/.pegasus/workflow.db: master_workflow rows {registered}"
        wf = stampede.execute("SELECT wf_id FROM workflow WHERE parent_wf_id IS NULL").fetchone()[0]
        job, instance, name, exitcode = stampede.execute(
            "SELECT j.job_id, i.job_instance_id, j.exec_job_id, i.exitcode FROM job_instance i "
            "JOIN job j ON j.job_id = i.job_id WHERE i.exitcode != 0 ORDER BY j.exec_job_id, i.job_submit_seq "
            "LIMIT 1").fetchone()
    finally:
        master.close()
        stampede.close()
    root, uuid, label, host, submit_dir = registered[0]
    return {"root": root, "uuid": uuid, "label": label, "host": host, "submit_dir": submit_dir, "wf": wf,
            "job": job, "instance": instance, "job_name": name, "exitcode": exitcode}


def section(lines: list[str], panel: str) -> list[str]:
    """The lines under `## <panel>` (up to the next section)."""
    start = lines.index(f"## {panel}") + 1
    end = next((n for n in range(start, len(lines)) if lines[n].startswith("## ")), len(lines))
    return lines[start:end]


@pytest.mark.timeout(900)
def test_dashboard_shows_streamer_like_monitord(chromium: str, cdn: dict[str, tuple[bytes, str]],
                                               tmp_path: Path) -> None:
    artifacts = Path(os.environ.get("STREAMER_ARTIFACTS", tempfile.gettempdir())) / "dashboard"
    artifacts.mkdir(parents=True, exist_ok=True)
    monitors = {"monitord": [sys.executable, "-m", "Pegasus.cli.pegasus-monitord"],
                "streamer": [sys.executable, "-m", "streamer", "monitord"]}
    runs: dict[str, tuple[Path, Path]] = {}
    procs = {}
    for name, command in monitors.items():
        run_dir = generate(tmp_path / name, jobs=3, scenario="post_failure", seed=0)
        home = tmp_path / f"home-{name}"
        (home / ".pegasus").mkdir(parents=True)
        (home / ".pegasus" / "service.py").write_text('AUTHENTICATION = "NoAuthentication"\nPROCESS_SWITCHING = False\n')
        runs[name] = (run_dir, home)
        procs[name] = subprocess.Popen([*command, "-N", "synth-0.dag.dagman.out"], cwd=run_dir,
                                       env={**os.environ, "TZ": "UTC", "HOME": str(home)},
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for name, proc in procs.items():
        assert proc.wait(timeout=600) == 0, name

    server = tmp_path / "serve.py"
    server.write_text(SERVER.format(user=USER))
    services = {}
    pages: dict[str, dict[str, list[str]]] = {}
    unserved: dict[str, list[str]] = {}
    try:
        for name, (run_dir, home) in runs.items():
            port = free_port()
            with open(tmp_path / f"service-{name}.log", "wb") as log:
                services[name] = (port, subprocess.Popen(
                    [sys.executable, str(server), str(port)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log,
                    env={**os.environ, "HOME": str(home), "FLASK_DEBUG": "0", "TZ": "UTC"}))
        for name, (port, _proc) in services.items():
            deadline = time.monotonic() + 60
            while not fetch_ok(f"https://127.0.0.1:{port}/u/{USER}/"):
                assert time.monotonic() < deadline, (tmp_path / f"service-{name}.log").read_text()[-2000:]
                time.sleep(0.5)
        for name, (port, _proc) in services.items():
            run_dir, home = runs[name]
            i = ids(run_dir, home)
            base = f"https://127.0.0.1:{port}/u/{USER}"
            urls = {
                "workflows": f"{base}/",
                "workflow": f"{base}/r/{i['root']}/w/{i['wf']}",
                "failed-job": f"{base}/r/{i['root']}/w/{i['wf']}/j/{i['job']}/ji/{i['instance']}",
                "statistics": f"{base}/r/{i['root']}/w/{i['wf']}/statistics",
            }
            replace = {str(run_dir): "<DIR>", f"127.0.0.1:{port}": "<HOST>", str(home): "<HOME>"}
            pages[name] = {}
            with Browser(chromium, cdn) as browser:
                for page, url in urls.items():
                    text = shown_text(browser, url, SECTIONS.get(page, []))
                    browser.screenshot(artifacts / f"{page}-{name}.png")
                    pages[name][page] = visible_text(text, replace)
                unserved[name] = browser.unserved
    finally:
        for _port, proc in services.values():
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    for name in pages:
        for page, lines in pages[name].items():
            (artifacts / f"{page}-{name}.txt").write_text("\n".join(lines) + "\n")
    for page in ("workflows", "workflow", "failed-job", "statistics"):
        ours, theirs = pages["streamer"][page], pages["monitord"][page]
        assert ours == theirs, f"{page} differs:\n" + "\n".join(
            f"{a!r:80} | {b!r}" for a, b in zip(ours, theirs) if a != b)
    # the pages are populated, so the equality above compares what a user sees: the workflow is listed, its job
    # tables and statistics are drawn (the same assertions fail when a page's scripts do not run or the master DB
    # lacks the workflow: the tables then say "No data available in table")
    assert unserved == {"monitord": [], "streamer": []}, "requests the test did not answer: " + repr(
        {name: sorted(set(urls)) for name, urls in unserved.items()})
    ref = ids(*runs["monitord"])
    workflows, workflow, statistics = (pages["streamer"][p] for p in ("workflows", "workflow", "statistics"))
    assert f"{ref['label']} {ref['host']} {ref['submit_dir']} Failed <TIME>" in workflows, "\n".join(workflows)
    assert "Showing 1 to 1 of 1 entries" in workflows and workflows[workflows.index("Failed") + 1] == "1"
    assert f"Workflow Details {ref['uuid']}" in workflow and f"Label {ref['label']}" in workflow
    failed_row = f"{ref['job_name']} {ref['exitcode']} Application Stdout/Stderr Condor Stderr/Pegasus Lite Log"
    assert failed_row in section(workflow, "failed_jobs"), section(workflow, "failed_jobs")
    assert "Showing 1 to 4 of 4 entries" in section(workflow, "successful_jobs")
    assert any(line.startswith("Tasks ") for line in statistics)
    assert any(line.startswith(f"{ref['job_name']} 1 condorpool ") for line in section(statistics, "job-stats"))
    assert any(line.startswith("Check Input ") for line in section(statistics, "int-stats"))
    assert any(line.startswith("findrange Successful 1 ") for line in section(statistics, "job-breakdown-stats"))
    failed_job = pages["streamer"]["failed-job"]
    # pegasus-service 5.1.3 cannot render a job instance page from SQLite (job_details.html:226 passes the NUMERIC
    # timestamp difference, a Decimal, to time_to_str): it shows its error page for monitord's database too, and
    # the equality above then checks that streamer's database fails it the same way
    if ref["job_name"] not in " ".join(failed_job):
        assert failed_job[:2] == ["pegasus-dashboard", "Unknown Error"], failed_job
        for name in runs:
            log = (tmp_path / f"service-{name}.log").read_text()
            assert "'decimal.Decimal' object cannot be interpreted as an integer" in log, name
    for page in ("workflows", "workflow", "failed-job", "statistics"):
        assert (artifacts / f"{page}-streamer.png").is_file()
