"""A refused login, a wrong vhost or a refused permission is final at once, in plain words, and leaves no spool
directory behind."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import aio_pika
import pytest

from tests.support.amqphelp import unique
from tests.conftest import unavailable
from streamer.cli.main import main




def events_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.bp"
    path.write_text("ts=2023-03-03T23:11:00.000000Z event=stampede.wf.plan level=Info "
                    "xwf.id=f84f05fc-a8d0-42b5-bac5-52d6f41a77e3 submit.hostname=h "
                    "root.xwf.id=f84f05fc-a8d0-42b5-bac5-52d6f41a77e3 submit.dir=/tmp/x dag.file.name=x.dag\n")
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


@pytest.fixture
def limited_user(amqp_url: str):
    """A RabbitMQ user of its own (random name, deleted afterwards); call it with (configure, write, read)."""
    if shutil.which("rabbitmqctl") is None:
        unavailable("rabbitmqctl not found (needed to create a user with limited permissions)")
    user, password = unique("streamer-t"), secrets.token_hex(8)

    def ctl(*args: str) -> None:
        done = subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr

    def permit(configure: str, write: str, read: str) -> tuple[str, str]:
        ctl("set_permissions", "-p", "/", user, configure, write, read)
        return user, password

    ctl("add_user", user, password)
    try:
        yield permit
    finally:
        ctl("delete_user", user)


@pytest.mark.parametrize("configure, write, doing, permission", [
    ("", ".*", "declaring", "configure"),  # may not declare the exchange
    (".*", "", "publishing to", "write"),  # declares it, may not publish to it
])
def test_a_refused_permission_is_final_at_once_in_plain_words(limited_user, amqp_url: str, tmp_path: Path,
                                                              capsys, configure: str, write: str, doing: str,
                                                              permission: str) -> None:
    user, password = limited_user(configure, write, ".*")
    source = events_file(tmp_path)
    host = amqp_url.split("@", 1)[1].rsplit("/", 1)[0]
    exchange = unique("streamer-refused")
    spool = tmp_path / "spool"
    # drain_timeout=120: a run that took the refusal for a lost broker would spool and retry for two minutes
    url = f"amqp://{user}:{password}@{host}/%2F/{exchange}?spool={spool}&drain_timeout=120&retry_max=1"
    started = time.monotonic()
    try:
        assert main(["load", str(source), "-q", "--dest", url]) == 1  # docs/guide/amqp.md: exit 1
    finally:
        asyncio.run(_delete_exchange(amqp_url, exchange))
    assert time.monotonic() - started < 20
    err = capsys.readouterr().err
    assert (f"{doing} exchange '{exchange}' in vhost '/' refused for user '{user}': the user has no {permission} "
            "permission on it (ACCESS_REFUSED; rabbitmqctl set_permissions)") in err, err
    assert "Connection.Close object" not in err and "spool" not in err.replace(f"spool={spool}", "")
    assert err.count("\n") == 1 and password not in err
    assert not spool.exists()  # no empty spool directory left behind


async def _delete_exchange(url: str, exchange: str) -> None:
    connection = await aio_pika.connect(url)
    try:
        await (await connection.channel()).exchange_delete(exchange)
    finally:
        await connection.close()
