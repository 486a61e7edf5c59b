"""Filters, URL masking, streamer.toml and pegasus.properties."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.config.settings import ConfigError, from_properties, load_toml, read_properties
from streamer.core.filters import EventFilter, FilterError
from streamer.util.urls import EndpointURL, mask
from streamer.util.urls import normalise as normalise_url

NAMES = ["stampede.xwf.start", "stampede.xwf.end", "stampede.xwf.map.subwf_job", "stampede.inv.start",
         "stampede.inv.end", "stampede.job_inst.main.end", "stampede.job_inst.image.info", "stampede.wf.plan"]


@pytest.mark.parametrize("patterns, expected", [
    ("*", NAMES),
    ("stampede.xwf.*", ["stampede.xwf.start", "stampede.xwf.end", "stampede.xwf.map.subwf_job"]),
    ("stampede.inv.end", ["stampede.inv.end"]),
    ("stampede.xwf.*,stampede.inv.end", ["stampede.xwf.start", "stampede.xwf.end",
                                         "stampede.xwf.map.subwf_job", "stampede.inv.end"]),
    ("stampede.inv.???", ["stampede.inv.end"]),
    ("stampede.inv.?????", ["stampede.inv.start"]),
    ("*.end", ["stampede.xwf.end", "stampede.inv.end", "stampede.job_inst.main.end"]),
    ("stampede.job_inst.*,!stampede.job_inst.image.info", ["stampede.job_inst.main.end"]),
    ("!stampede.xwf.*", ["stampede.inv.start", "stampede.inv.end", "stampede.job_inst.main.end",
                         "stampede.job_inst.image.info", "stampede.wf.plan"]),
    ("!stampede.xwf.*, !*.start", ["stampede.inv.end", "stampede.job_inst.main.end",
                                   "stampede.job_inst.image.info", "stampede.wf.plan"]),
    (" stampede.wf.plan , stampede.inv.end ", ["stampede.inv.end", "stampede.wf.plan"]),
    ("stampede.xwf", []),
    ("", []),
    (["stampede.wf.plan", "!stampede.wf.plan"], []),
])
def test_filter_forms(patterns, expected) -> None:
    assert [n for n in NAMES if EventFilter(patterns).match(n)] == expected


def test_unmatched_patterns_are_suggested_under_the_namespaces_of_the_names_given() -> None:
    """The core knows no `stampede.`: the namespaces come from the names the caller gives."""
    from streamer.core.filters import unmatched

    names = ["acme.job.start", "acme.job.end", "acme.wf.start", "zeta.job.end"]
    assert unmatched("job.*,acme.wf.*,wf.start,nothing.here", names) == [
        ("job.*", ["acme.job.start", "acme.job.end", "zeta.job.end"]),
        ("wf.start", ["acme.wf.start"]),
        ("nothing.here", []),
    ]
    assert unmatched("job_inst.main.end", NAMES) == [("job_inst.main.end", ["stampede.job_inst.main.end"])]


def test_filter_special_characters_are_literal() -> None:
    assert EventFilter("stampede.inv.end").match("stampedeXinvXend") is False
    assert EventFilter("a+b").match("a+b") and not EventFilter("a+b").match("aab")
    with pytest.raises(FilterError):
        EventFilter("!")


def test_mask_hides_passwords_everywhere() -> None:
    assert mask("amqp://alice:s3cret@host:5672/%2F/x") == "amqp://alice:***@host:5672/%2F/x"
    text = "failed to reach postgresql://bob:pw@db/x and amqps://c:d@e/f"
    assert "pw" not in mask(text) and ":d@" not in mask(text)
    assert mask("file:///tmp/a.bp") == "file:///tmp/a.bp"
    url = EndpointURL.parse("amqp://alice:s3cret@host/%2F/ex?events=stampede.*")
    assert "s3cret" not in str(url) and "s3cret" not in repr(url)
    assert url.options == {"events": "stampede.*"} and url.scheme == "amqp"


def test_normalise_url(tmp_path: Path) -> None:
    assert normalise_url("-") == "-"
    assert normalise_url("amqp://h/x") == "amqp://h/x"
    assert normalise_url(str(tmp_path / "x.bp")) == f"file://{tmp_path}/x.bp"
    assert normalise_url("file:rel.jsonl").endswith("/rel.jsonl")


def test_toml_config(tmp_path: Path) -> None:
    path = tmp_path / "streamer.toml"
    path.write_text('on_error = "isolate"\ncheckpoint = "/tmp/c"\n'
                    '[[endpoint]]\nurl = "file:///tmp/a.jsonl"\nevents = ["stampede.xwf.*", "stampede.inv.end"]\n'
                    'buffer = 10\nbatch = 5\nfsync = true\n'
                    '[[endpoint]]\nurl = "amqp://u:p@h/%2F/x"\n')
    settings = load_toml(path)
    assert settings.on_error == "isolate" and settings.checkpoint == "/tmp/c"
    first, second = settings.endpoints
    assert (first.url.raw, first.events, first.buffer, first.batch, first.options) == (
        "file:///tmp/a.jsonl", "stampede.xwf.*,stampede.inv.end", 10, 5, {"fsync": True})
    assert second.url.raw == "amqp://u:p@h/%2F/x" and second.events is None
    assert "u:***@" in str(second)


@pytest.mark.parametrize("body, message", [
    ("[[endpoint]]\nevents='*'\n", "endpoint #1 has no url"),
    ("on_error='maybe'\n", "on_error must be"),
    ("[[endpoint]]\nurl='-'\nbuffer=0\n", "buffer must be a positive integer"),
    ("this is not toml", "streamer.toml"),
])
def test_toml_errors_name_the_file(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "streamer.toml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message):
        load_toml(path)


def test_pegasus_properties(tmp_path: Path) -> None:
    path = tmp_path / "pegasus.properties"
    path.write_text(
        "# monitord settings\n"
        "pegasus.monitord.encoding = json\n"
        "pegasus.catalog.workflow.amqp.url amqp://vahi:XXXXX@amqp.isi.edu:5672/panorama/monitoring\n"
        "pegasus.catalog.workflow.amqp.events = stampede.xwf.*,stampede.static.*\n"
        "pegasus.catalog.workflow.file.url: file:///lfs1/nl.bp\n"
        "pegasus.catalog.workflow.url=sqlite:////tmp/wf.db\n"
        "long.key = a \\\n   b\n"
    )
    assert read_properties(path)["long.key"] == "a b"
    settings = from_properties(path)
    assert settings.encoding == "json"
    assert [(s.url.raw, s.events) for s in settings.endpoints] == [
        ("sqlite:////tmp/wf.db", None),
        ("amqp://vahi:XXXXX@amqp.isi.edu:5672/panorama/monitoring", "stampede.xwf.*,stampede.static.*"),
        ("file:///lfs1/nl.bp", None),
    ]
    with pytest.raises(ConfigError, match="no such properties file"):
        from_properties(tmp_path / "missing.properties")
