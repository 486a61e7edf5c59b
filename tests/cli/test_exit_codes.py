"""Exit codes: 0 done, 2 a usage error or the world said no (one line), 1 a bug in streamer (said as one)."""

from __future__ import annotations

import argparse

import pytest

from streamer.cli import main as cli
from streamer.config.settings import ConfigError


def _failing(exc: BaseException):  # type: ignore[no-untyped-def]
    async def dispatch(args: argparse.Namespace) -> int:
        raise exc
    return dispatch


@pytest.mark.parametrize("exc", [KeyError("job"), TypeError("unsupported operand"), ValueError("math domain error"),
                                 AttributeError("'NoneType' object has no attribute 'x'")])
def test_an_unexpected_exception_is_a_bug_report_with_exit_1(exc: BaseException, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    monkeypatch.setattr(cli, "dispatch", _failing(exc))
    assert cli.main(["load", str(tmp_path / "x.bp"), "--dest", "-"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"streamer: internal error: {type(exc).__name__}: ")
    assert "this is a bug in streamer, not in your input" in err and "-v" in err
    assert "Traceback" not in err


def test_with_v_the_bug_report_carries_the_traceback_masked(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    monkeypatch.setattr(cli, "dispatch", _failing(KeyError("amqp://u:s3cret@host/x")))
    assert cli.main(["load", str(tmp_path / "x.bp"), "--dest", "-", "-v"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError" in err
    assert "s3cret" not in err


@pytest.mark.parametrize("exc", [ConfigError("no endpoint: give --dest URL"), FileNotFoundError(2, "No such file")])
def test_a_usage_error_is_one_line_with_exit_2(exc: BaseException, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    monkeypatch.setattr(cli, "dispatch", _failing(exc))
    assert cli.main(["load", str(tmp_path / "x.bp"), "--dest", "-"]) == 2
    err = capsys.readouterr().err
    assert err == f"streamer: error: {exc}\n"
