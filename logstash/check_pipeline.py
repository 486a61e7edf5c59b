"""Parse a Logstash pipeline file and list the event fields it reads and writes.

Why: Logstash itself is rarely installed where the pipeline is edited, and a
field name misspelt in a `convert` or a condition fails silently (the filter
just never matches). This parser understands the config grammar well enough
(sections, plugins, settings with strings, numbers, barewords, arrays and
hashes, `if / else if / else` with field references, `%{...}` sprintf
references, comments) to extract every field the pipeline names, so a test
can check each against the fields streamer actually publishes.

    python logstash/check_pipeline.py logstash/pipeline/stampede.conf
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union


class ConfigSyntaxError(ValueError):
    """The pipeline file does not follow Logstash's config grammar."""


# ---------------------------------------------------------------- tokens

_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<regex>/(?:[^/\\\n]|\\.)+/)
  | (?P<fieldref>(?:\[[^\[\]\s"',]+\])+)
  | (?P<op>=>|==|!=|<=|>=|=~|!~|[<>!{}()\[\],])
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<word>[A-Za-z_@][\w@.\-]*)
""", re.VERBOSE)


@dataclass
class Token:
    kind: str
    text: str
    line: int


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos, line = 0, 1
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ConfigSyntaxError(f"line {line}: unexpected {text[pos:pos + 20]!r}")
        kind = match.lastgroup or ""
        chunk = match.group()
        if kind != "space":
            tokens.append(Token(kind, chunk, line))
        line += chunk.count("\n")
        pos = match.end()
    return tokens


# ---------------------------------------------------------------- tree

Value = Union[str, int, float, list["Value"], dict[str, "Value"]]


@dataclass
class Plugin:
    name: str
    settings: list[tuple[str, Value]]
    line: int


@dataclass
class Branch:
    """`if COND {..} else if COND {..} else {..}`: (condition tokens or None, body) pairs."""

    arms: list[tuple[list[Token] | None, list["Statement"]]]


Statement = Union[Plugin, Branch]


@dataclass
class Pipeline:
    sections: dict[str, list[Statement]] = field(default_factory=dict)


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    # -- helpers
    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, text: str | None = None, kind: str | None = None) -> Token:
        token = self.peek()
        if token is None:
            raise ConfigSyntaxError(f"unexpected end of file (wanted {text or kind})")
        if (text is not None and token.text != text) or (kind is not None and token.kind != kind):
            raise ConfigSyntaxError(f"line {token.line}: expected {text or kind}, found {token.text!r}")
        self.pos += 1
        return token

    def at(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token.text == text

    # -- grammar
    def pipeline(self) -> Pipeline:
        result = Pipeline()
        while self.peek() is not None:
            name = self.take(kind="word").text
            if name not in ("input", "filter", "output"):
                raise ConfigSyntaxError(f"unknown section {name!r}")
            self.take("{")
            result.sections.setdefault(name, []).extend(self.statements())
            self.take("}")
        return result

    def statements(self) -> list[Statement]:
        body: list[Statement] = []
        while not self.at("}"):
            token = self.peek()
            if token is None:
                raise ConfigSyntaxError("unexpected end of file inside a block")
            if token.text == "if":
                body.append(self.branch())
            else:
                body.append(self.plugin())
        return body

    def branch(self) -> Branch:
        self.take("if")
        arms = [(self.condition(), self.block())]
        while self.at("else"):
            self.take("else")
            if self.at("if"):
                self.take("if")
                arms.append((self.condition(), self.block()))
            else:
                arms.append((None, self.block()))
                break
        return Branch(arms)

    def condition(self) -> list[Token]:
        tokens: list[Token] = []
        depth = 0
        while True:
            token = self.peek()
            if token is None:
                raise ConfigSyntaxError("unexpected end of file in a condition")
            if token.text == "{" and depth == 0:
                return tokens
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(token.text, 0)
            tokens.append(self.take())

    def block(self) -> list[Statement]:
        self.take("{")
        body = self.statements()
        self.take("}")
        return body

    def plugin(self) -> Plugin:
        name = self.take(kind="word")
        self.take("{")
        settings: list[tuple[str, Value]] = []
        while not self.at("}"):
            key = self.take()
            if key.kind not in ("word", "string"):
                raise ConfigSyntaxError(f"line {key.line}: bad setting name {key.text!r}")
            self.take("=>")
            settings.append((_unquote(key.text), self.value()))
        self.take("}")
        return Plugin(name.text, settings, name.line)

    def value(self) -> Value:
        token = self.take()
        if token.kind == "string":
            return _unquote(token.text)
        if token.kind == "number":
            return float(token.text) if "." in token.text else int(token.text)
        if token.kind in ("word", "fieldref"):
            return token.text
        if token.text == "[":
            items: list[Value] = []
            while not self.at("]"):
                items.append(self.value())
                if self.at(","):
                    self.take(",")
            self.take("]")
            return items
        if token.text == "{":
            table: dict[str, Value] = {}
            while not self.at("}"):
                key = self.take()
                self.take("=>")
                table[_unquote(key.text)] = self.value()
                if self.at(","):
                    self.take(",")
            self.take("}")
            return table
        raise ConfigSyntaxError(f"line {token.line}: unexpected {token.text!r} as a value")


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return text


def parse(text: str) -> Pipeline:
    return _Parser(tokenize(text)).pipeline()


# ---------------------------------------------------------------- field references

_SPRINTF = re.compile(r"%\{([^}+][^}]*)\}")


def field_path(ref: str) -> str:
    """`[a][b]` or `a` -> `a.b` / `a` (the top-level field is what the events carry)."""
    ref = ref.strip()
    if ref.startswith("["):
        return ".".join(re.findall(r"\[([^\]]+)\]", ref))
    return ref


@dataclass
class FieldUse:
    read: set[str] = field(default_factory=set)     # fields the pipeline expects in events
    written: set[str] = field(default_factory=set)  # fields the pipeline creates


# Settings whose value names fields, per plugin: (setting, "read"|"write", shape).
_FIELD_SETTINGS: dict[str, list[tuple[str, str, str]]] = {
    "date": [("match", "read", "first"), ("target", "write", "one")],
    "fingerprint": [("source", "read", "many"), ("target", "write", "one")],
    "mutate": [("convert", "read", "keys"), ("copy", "read", "keys"), ("copy", "write", "values"),
               ("rename", "read", "keys"), ("rename", "write", "values"),
               ("remove_field", "read", "many"), ("add_field", "write", "keys")],
    "json": [("source", "read", "one"), ("target", "write", "one")],
}
_COMMON_WRITE = ("add_field",)


def _names(value: Value, shape: str) -> list[str]:
    if shape == "one" and isinstance(value, str):
        return [value]
    if shape == "first" and isinstance(value, list) and value and isinstance(value[0], str):
        return [value[0]]
    if shape == "many":
        return [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
    if shape == "keys" and isinstance(value, dict):
        return list(value)
    if shape == "values" and isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, str)]
    return []


def _strings(value: Value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    return []


def _walk(statements: list[Statement], use: FieldUse) -> None:
    for statement in statements:
        if isinstance(statement, Branch):
            for condition, body in statement.arms:
                for token in condition or []:
                    if token.kind == "fieldref":
                        use.read.add(field_path(token.text))
                _walk(body, use)
            continue
        table = _FIELD_SETTINGS.get(statement.name, [])
        for key, value in statement.settings:
            for setting, mode, shape in table:
                if setting == key:
                    target = use.read if mode == "read" else use.written
                    target.update(field_path(n) for n in _names(value, shape))
            if key in _COMMON_WRITE and not any(s == key for s, _, _ in table):
                use.written.update(field_path(n) for n in _names(value, "keys"))
            for text in _strings(value):
                use.read.update(field_path(ref) for ref in _SPRINTF.findall(text))


def field_use(pipeline: Pipeline) -> FieldUse:
    use = FieldUse()
    for name in ("filter", "output"):
        _walk(pipeline.sections.get(name, []), use)
    return use


def message_fields(pipeline: Pipeline) -> set[str]:
    """Fields the pipeline expects the messages to carry (not its own or metadata)."""
    use = field_use(pipeline)
    own = use.written | {"@timestamp", "@version", "tags", "type"}
    return {f for f in use.read if not f.startswith("@metadata") and f not in own}


def plugins(pipeline: Pipeline) -> list[Plugin]:
    found: list[Plugin] = []

    def walk(statements: list[Statement]) -> None:
        for statement in statements:
            if isinstance(statement, Branch):
                for _, body in statement.arms:
                    walk(body)
            else:
                found.append(statement)

    for body in pipeline.sections.values():
        walk(body)
    return found


def setting(plugin: Plugin, key: str, default: Any = None) -> Any:
    for name, value in plugin.settings:
        if name == key:
            return value
    return default


def main(argv: list[str]) -> int:
    for path in argv or [str(Path(__file__).parent / "pipeline" / "stampede.conf")]:
        pipeline = parse(Path(path).read_text())
        use = field_use(pipeline)
        print(f"{path}:")
        print("  reads:  " + " ".join(sorted(message_fields(pipeline))))
        print("  writes: " + " ".join(sorted(use.written)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
