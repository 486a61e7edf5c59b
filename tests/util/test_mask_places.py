"""Passwords that hold `@ / : % space # ?` or unicode, hidden wherever a URL is printed (issue 27 item 3):
usage errors echoing an argument, connection errors, log lines, endpoint names (end summary, metrics
labels, status) and dead-letter files."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Sequence

import orjson
import pytest

from streamer.cli.main import main
from streamer.endpoints.base import Endpoint
from streamer.endpoints.layers.deadletter import DeadLetters
from streamer.endpoints.layers.resilience import Rejected
from streamer.events import bp
from streamer.run.pipeline import run_pipeline
from streamer.util.runtime import setup_logging
from streamer.sources.base import Batch, Source
from streamer.util.urls import EndpointURL
from tests.util.test_mask import NASTY

LINE = "ts=2023-11-14T22:13:00.000000Z event=stampede.xwf.start level=Info xwf.id=x restart_count=0\n"


def leaked(password: str, text: str) -> bool:
    """The password, or a tail of it after an `@` (what the old mask left), shows in `text`."""
    return password in text or any(len(tail) > 2 and f"{tail}@" in text for tail in password.split("@")[1:])


@pytest.mark.parametrize("password", NASTY)
def test_a_url_given_to_the_wrong_option_is_echoed_masked(password: str, tmp_path: Path, capsys) -> None:
    (tmp_path / "in.bp").write_text(LINE)
    with pytest.raises(SystemExit):
        main(["load", str(tmp_path / "in.bp"), "--on-error", f"amqp://u:{password}@h/x"])
    err = capsys.readouterr().err
    assert "invalid choice: 'amqp://u:***@h/x'" in err and not leaked(password, err), err


@pytest.mark.parametrize("scheme", ["amqp", "postgresql", "mysql"])
@pytest.mark.parametrize("password", ["Ab@Secret9", "a/b c", "p:%#?\u00e4@x"])
def test_connection_errors_name_the_endpoint_masked(scheme: str, password: str, tmp_path: Path, capsys,
                                                    monkeypatch) -> None:
    """Nothing listens on port 1: the connection is refused (AMQP spools, the databases fail the run); a
    password with a raw `/` or `#` makes the URL unusable (exit 2). Whatever the outcome, it is said masked."""
    (tmp_path / "in.bp").write_text(LINE)
    monkeypatch.setenv("STREAMER_STATE_DIR", str(tmp_path / "state"))
    setup_logging(0)
    url = f"{scheme}://u:{password}@127.0.0.1:1/db" + ("/x" if scheme == "amqp" else "")
    main(["load", str(tmp_path / "in.bp"), "--dest", url, "-q"])
    err = capsys.readouterr().err
    assert "u:***@127.0.0.1:1" in err and not leaked(password, err), err


@pytest.mark.parametrize("password", NASTY)
def test_log_lines_and_endpoint_names(password: str) -> None:
    setup_logging(0)
    handler = logging.getLogger().handlers[0]
    record = logging.LogRecord("streamer", logging.ERROR, __file__, 1, "cannot reach %s: %s",
                               (f"amqps://bob:{password}@h/", "refused"), None)
    assert handler.format(record) == "streamer: ERROR: cannot reach amqps://bob:***@h/: refused"
    url = EndpointURL.parse(f"postgresql://bob:{password}@db.example.org/stampede")
    assert url.masked == "postgresql://bob:***@db.example.org/stampede"  # Endpoint.name: summary, metrics, status


class Refusing(Endpoint):
    async def write(self, batch: Sequence[Any]) -> None:
        raise Rejected(f"refused by {self.url.raw}")  # a library message holding the raw URL


class Listed(Source):
    def __init__(self, events: list[Any]) -> None:
        self.events = events

    async def batches(self) -> Any:
        yield Batch(events=self.events, position=None)


@pytest.mark.parametrize("password", ["Ab@Secret9", "a/b c", "p:%#?\u00e4@x"])
def test_dead_letter_files_name_the_endpoint_masked(password: str, tmp_path: Path) -> None:
    endpoint = Refusing(EndpointURL.parse(f"postgresql://u:{password}@db/stampede"))
    layer = DeadLetters(endpoint, tmp_path / "dead.jsonl")
    result = asyncio.run(run_pipeline(Listed([bp.parse_line(LINE.strip())]), [], endpoints=[layer], progress=False,
                                      signals=False))
    assert result.exit_code == 0
    text = (tmp_path / "dead.jsonl").read_text()
    record = orjson.loads(text.splitlines()[0])["dead_letter"]
    assert record["endpoint"] == "postgresql://u:***@db/stampede"
    assert not leaked(password, text), text
