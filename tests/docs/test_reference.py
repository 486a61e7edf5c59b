"""docs/reference/ is generated from the code's own declarations (`python -m streamer.docs`) and committed: the
committed pages must be what the generator writes today, and hold every option, event, exit code and metric."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from streamer.util import exitcodes
from streamer.docs import reference
from streamer.endpoints import REGISTRY
from streamer.endpoints.options import declared
from streamer.events import schema
from streamer.events.chimbuko import COLLECTIONS
from streamer.run.metrics import METRICS, Metrics

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "reference"


def test_the_committed_reference_is_what_the_generator_writes(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "streamer.docs", "--out", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.md", "exit-codes.md", "metrics.md", "urls.md"]
    stale = [p.name for p in sorted(tmp_path.iterdir())
             if not (COMMITTED / p.name).is_file()
             or (COMMITTED / p.name).read_text(encoding="utf-8") != p.read_text(encoding="utf-8")]
    assert stale == [], f"docs/reference/ is out of date ({', '.join(stale)}): run `python -m streamer.docs` " \
                        "in the repository root and commit docs/reference/"


def test_urls_lists_every_scheme_and_every_declared_option() -> None:
    text = reference.urls_md()
    for scheme, cls in REGISTRY.table().items():
        assert f"`{scheme}:" in text, scheme
        for option in declared(cls):
            assert f"`{option.name}`" in text, (scheme, option.name)
    assert "| `spool_size` | SIZE | 1G |" in text and "| `retry_for` | SECONDS | 300 |" in text


def test_events_lists_every_event_and_field_of_the_schema() -> None:
    text = reference.events_md()
    for name in schema.KNOWN_EVENTS:
        assert f"## `{name}`" in text, name
    assert "| `exitcode` | int | yes |" in text and "| `restart_count` | int | yes |" in text
    for name in COLLECTIONS.values():
        assert f"`{name}`" in text, name


def test_exit_codes_are_declared_once_and_used_by_the_commands() -> None:
    text = reference.exit_codes_md()
    for code in exitcodes.Exit:
        assert f"| {int(code)} |" in text, code
    from streamer.cli.help import epilog
    from streamer.monitord.command import DAGMAN_GONE
    from streamer.monitord.files import PID_IN_USE

    assert exitcodes.help_block("load") in epilog("load")
    assert exitcodes.help_block("replay") in epilog("replay") and exitcodes.help_block("tail") in epilog("tail")
    assert (DAGMAN_GONE, PID_IN_USE) == (exitcodes.Exit.DAGMAN_GONE, exitcodes.Exit.PID_IN_USE)


def test_metrics_are_declared_once_and_are_what_the_exporter_serves() -> None:
    served = {family.name: family.type for family in Metrics().collect()}
    assert served == {spec.name: spec.kind for spec in METRICS}
    text = reference.metrics_md()
    for spec in METRICS:
        assert f"`{spec.exposed}" in text, spec.name
