"""A refused login or a wrong vhost is final at once, in plain words, and leaves no spool directory behind."""

from __future__ import annotations

from pathlib import Path


from streamer.cli import main




def events_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.bp"
    path.write_text("ts=2023-03-03T23:11:00.000000Z event=stampede.wf.plan level=Info "
                    "xwf.id=f84f05fc-a8d0-42b5-bac5-52d6f41a77e3 submit.hostname=h\n")
    return path


def test_wrong_vhost_and_refused_login_are_final_at_once(amqp_url: str, tmp_path: Path, capsys) -> None:
    source = events_file(tmp_path)
    host = amqp_url.split("@", 1)[1].rsplit("/", 1)[0]
    spool = tmp_path / "spool"
    # drain_timeout=2: before the fix the run "spooled" and gave up after it with the aiormq repr
    url = f"amqp://guest:guest@{host}/no-such-vhost/workflows?spool={spool}&drain_timeout=2&retry_max=1"
    assert main(["load", str(source), "-q", "--dest", url]) == 1
    err = capsys.readouterr().err
    assert ("cannot connect to amqp://guest@" f"{host}/no-such-vhost/workflows: vhost 'no-such-vhost' not found "
            "or not allowed for user 'guest'") in err
    assert "Connection.Close object" not in err and "spooling" not in err and err.count("\n") == 1
    assert not spool.exists()
    bad_login = f"amqp://guest:wrong@{host}/%2F/workflows?spool={spool}&drain_timeout=2&retry_max=1"
    assert main(["load", str(source), "-q", "--dest", bad_login]) == 1
    err = capsys.readouterr().err
    assert "login refused for user 'guest' (ACCESS_REFUSED: wrong user name or password)" in err and "wrong@" not in err
    assert not spool.exists()  # a refused login leaves no empty spool directory
