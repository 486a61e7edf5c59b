"""Pegasus properties found where pegasus-monitord finds them, and what monitord reads from them.

Order (monitord 5.1.3's `Properties.new`): the first readable file of `--conf`,
the properties file the braindump names (`properties:` relative to its
`submit_dir`), `~/.pegasusrc`, `~/.pegasus/pegasus.conf`; then `-Dkey=value`
arguments override single keys. Every value remembers the file and line it came
from, so a malformed value is reported as `FILE:LINE: ...`. Unknown keys are
ignored, as by monitord.
"""

from __future__ import annotations

import os
import pwd
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from streamer.config.settings import ConfigError, EndpointSpec
from streamer.core.options import OptionError, parse_bool
from streamer.util.urls import EndpointURL, mask

_WORKFLOW_URL = re.compile(r"^pegasus\.catalog\.workflow\.([^.]+)\.url$")


@dataclass
class Value:
    text: str
    origin: str  # "FILE:LINE" or "-D"


@dataclass
class Properties:
    values: dict[str, Value] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def get(self, key: str, default: str | None = None) -> str | None:
        value = self.values.get(key)
        return value.text if value is not None else default

    def where(self, key: str) -> str:
        value = self.values.get(key)
        return value.origin if value is not None else "properties"

    def boolean(self, key: str, default: bool) -> bool:
        text = self.get(key)
        if text is None or text.strip() == "":
            return default
        try:
            return parse_bool(text)
        except OptionError:
            raise ConfigError(f"{self.where(key)}: {key} must be true or false, not {text!r}") from None

    def integer(self, key: str, *, minimum: int = 0) -> int | None:
        text = self.get(key)
        if text is None or text.strip() == "":
            return None
        try:
            number = int(text.strip())
        except ValueError:
            raise ConfigError(f"{self.where(key)}: {key} must be an integer, not {text!r}") from None
        if number < minimum:
            raise ConfigError(f"{self.where(key)}: {key} must be >= {minimum}, not {number}")
        return number

    def number(self, key: str) -> float | None:
        text = self.get(key)
        if text is None or text.strip() == "":
            return None
        try:
            number = float(text.strip())
        except ValueError:
            raise ConfigError(f"{self.where(key)}: {key} must be a number of seconds, not {text!r}") from None
        if number < 0:
            raise ConfigError(f"{self.where(key)}: {key} must not be negative")
        return number


_SUBSTITUTION = re.compile(r"\$\{([A-Za-z0-9._]+)\}")


def system_properties(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Java-style system properties Pegasus's reader offers to `${...}` (`user.home`, `user.name`, ...)."""
    env = os.environ if env is None else env
    found = {"file.separator": ",", "java.io.tmpdir": env.get("TMP") or tempfile.gettempdir(),
             "os.name": os.uname()[0], "os.version": os.uname()[2], "os.arch": os.uname()[4],
             "user.dir": os.getcwd(), "user.language": env.get("LANG") or "en"}
    for key, var in (("user.home", "HOME"), ("user.timezone", "TZ"), ("pegasus.home", "PEGASUS_HOME"),
                     ("java.home", "JAVA_HOME"), ("java.class.path", "CLASSPATH")):
        if env.get(var):
            found[key] = env[var]
    if "user.home" not in found:
        found["user.home"] = pwd.getpwuid(os.geteuid()).pw_dir
    found["user.name"] = env.get("USER") or env.get("LOGNAME") or pwd.getpwuid(os.geteuid()).pw_name
    return found


def substitute(text: str, known: Mapping[str, str], env: Mapping[str, str] | None = None) -> str:
    """`${name}` replaced by: a property set before it (or by -D), a system property (`user.home`, ...),
    the environment variable `name`; else by nothing (as Pegasus's reader does with unknown names)."""
    if "${" not in text:
        return text
    env = os.environ if env is None else env
    system: dict[str, str] | None = None

    def value(match: re.Match[str]) -> str:
        nonlocal system
        name = match.group(1)
        if name in known:
            return known[name]
        if system is None:
            system = system_properties(env)
        return system.get(name, env.get(name, ""))

    return _SUBSTITUTION.sub(value, text)


def parse_file(path: str | Path, defines: Mapping[str, Value] | None = None,
               env: Mapping[str, str] | None = None) -> dict[str, Value]:
    """Java-style properties with the line of every key (`key=value`, `key: value`, `key value`).

    `${name}` in a value is substituted (see `substitute`): properties set on earlier lines and the `-D`
    `defines` first."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    out: dict[str, Value] = {}
    logical, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if not logical:
            start = number
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"^([^\s=:]+)\s*[=:\s]\s*(.*)$", logical)
        key, value = (match.group(1), match.group(2).strip()) if match else (logical, "")
        known = {k: v.text for k, v in out.items()}
        known.update({k: v.text for k, v in (defines or {}).items()})
        out[key] = Value(substitute(value, known, env), f"{path}:{start}")
        logical = ""
    return out


def split_defines(argv: list[str]) -> tuple[dict[str, Value], list[str]]:
    """Leading `-Dkey=value` / `-D key=value` arguments (Pegasus's Java-style overrides) and the rest."""
    defines: dict[str, Value] = {}
    rest = list(argv)
    while rest and rest[0].startswith("-D"):
        arg = rest.pop(0)
        if arg == "-D":
            if not rest or "=" not in rest[0]:
                rest.insert(0, arg)
                break
            arg = rest.pop(0)
        else:
            arg = arg[2:]
        key, _, value = arg.partition("=")
        if key:
            defines[key.strip()] = Value(value.strip(), "-D")
    return defines, rest


def candidates(conf: str | None, submit_dir: Path, braindump: dict[str, str], home: str | None) -> list[Path]:
    """Files monitord would read, best first (only the first readable one is used)."""
    found: list[Path] = []
    if conf:
        found.append(Path(conf))
    name = braindump.get("properties")
    if name:
        # relative to the braindump's submit_dir, as monitord joins it (a moved submit dir loses it there too)
        found.append(Path(braindump.get("submit_dir") or str(submit_dir)) / name)
    if home:
        found.append(Path(home) / ".pegasusrc")
        found.append(Path(home) / ".pegasus" / "pegasus.conf")
    return found


def discover(conf: str | None, submit_dir: Path, braindump: dict[str, str],
             defines: dict[str, Value] | None = None, home: str | None = None) -> Properties:
    """The properties monitord would use for the workflow in `submit_dir`."""
    props = Properties()
    home = home if home is not None else os.environ.get("HOME")
    if conf and not (os.path.isfile(conf) and os.access(conf, os.R_OK)):
        raise ConfigError(f"{conf}: no such properties file (--conf)")
    for path in candidates(conf, submit_dir, braindump, home):
        if path.is_file() and os.access(path, os.R_OK):
            props.values.update(parse_file(path, defines))
            props.sources.append(str(path))
            break
    if defines:
        props.values.update(defines)
        props.sources.append("-D")
    return props


# ---------------------------------------------------------------- what monitord reads

def timeout_options(props: Properties, name: str | None, scheme: str) -> dict[str, float]:
    """`pegasus.catalog[.workflow[.<name>]|.*].timeout` as the endpoint's wait option.

    monitord uses it as the connect timeout of AMQP and the database; streamer
    maps it to how long an endpoint waits for the server (AMQP `confirm_timeout`,
    PostgreSQL `retry_for`).
    """
    keys = ["pegasus.catalog.*.timeout", "pegasus.catalog.*.db.timeout", "pegasus.catalog.workflow.timeout",
            "pegasus.catalog.workflow.db.timeout"]
    if name:
        keys += [f"pegasus.catalog.workflow.{name}.timeout", f"pegasus.catalog.workflow.{name}.db.timeout"]
    value = None
    for key in keys:
        number = props.number(key)
        if number is not None:
            value = number
    if value is None:
        return {}
    if scheme in ("amqp", "amqps"):
        return {"confirm_timeout": value}
    if scheme in ("postgresql", "postgres"):
        return {"retry_for": value}
    return {}


def _check_url(props: Properties, key: str, text: str) -> EndpointURL:
    from streamer.endpoints import EndpointError, endpoint_class, unknown_scheme

    try:
        url = EndpointURL.given(text)
    except ValueError as exc:
        raise ConfigError(f"{props.where(key)}: {key}: {mask(str(exc))}") from None
    try:
        endpoint_class(url.scheme)
    except EndpointError:
        raise ConfigError(f"{props.where(key)}: {key}: {unknown_scheme(url.scheme, url.masked)}") from None
    return url


def workflow_url(props: Properties, default: str) -> EndpointURL:
    """The Stampede DB: `pegasus.catalog.workflow.url`, `pegasus.monitord.output`, or the default sqlite."""
    for key in ("pegasus.catalog.workflow.url", "pegasus.monitord.output"):
        value = props.get(key)
        if value:
            return _check_url(props, key, value)
    return EndpointURL.parse(default)


def extra_endpoints(props: Properties) -> list[EndpointSpec]:
    """Every `pegasus.catalog.workflow.<name>.url` with its `.events` filter (monitord's multiplexing)."""
    specs = []
    for key in sorted(props.values):
        match = _WORKFLOW_URL.match(key)
        value = props.get(key)
        if not match or not value:
            continue
        name = match.group(1)
        url = _check_url(props, key, value)
        # without .events an AMQP endpoint sends monitord's default four events (its own default filter)
        events = props.get(f"pegasus.catalog.workflow.{name}.events")
        spec = EndpointSpec(url=url, events=events or None)
        spec.options.update(timeout_options(props, name, url.scheme))
        specs.append(spec)
    return specs


def master_url(props: Properties, home: str | None) -> EndpointURL | None:
    """The master (dashboard) DB: `pegasus.catalog.master.url`, `pegasus.dashboard.output`, `~/.pegasus/workflow.db`."""
    for key in ("pegasus.catalog.master.url", "pegasus.dashboard.output"):
        value = props.get(key)
        if value:
            return _check_url(props, key, value)
    if not home:
        return None
    return EndpointURL.parse(f"sqlite:///{os.path.join(home, '.pegasus', 'workflow.db')}")


def encoding(props: Properties) -> str | None:
    value = props.get("pegasus.monitord.encoding")
    if value is None or not value.strip():
        return None
    if value.strip().lower() not in ("bp", "json", "bson"):
        raise ConfigError(f"{props.where('pegasus.monitord.encoding')}: pegasus.monitord.encoding must be "
                          f"bp, json or bson, not {value!r}")
    return value.strip().lower()
