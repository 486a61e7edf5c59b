"""The stable event id: canonical form version 1 (streamer/events/canonical.py, docs/guide/events.md, "Stable event id").

- the vectors file is what the code generates, and every vector's bytes are
  what the written form says (an independent encoder of the spec below) and
  what the Python and the compiled paths hash;
- the ids of every event in the corpus are those of the release before the
  compiled layer was cut (a digest of them is frozen here).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any


from streamer.events import bp, canonical, jsonenc, native
from streamer.events.event import Event, content_id, ensure_ids

VECTORS = Path(__file__).resolve().parents[1] / "data" / "id_vectors_v1.json"

CORPUS_IDS_SHA256 = "582396777bf83d44e3711c2ce8d8570babc4da7a707e2775060068fc0980b023"
"""sha256 of `corpus_id_listing` computed by the code before the cut (commit c582f4e), pure and compiled alike."""


# ---------------------------------------------------------------- the written form, encoded independently

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(text: str) -> str:
    return '"' + "".join(_SHORT.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 else c) for c in text) + '"'


def _float(x: float) -> str:
    if not math.isfinite(x):
        return "null"
    digits = repr(x)
    if 1e-5 <= abs(x) < 1e16:
        if "e" not in digits:
            return digits
        mantissa, exponent = digits.split("e")  # repr writes 1e-05: positional
        return format(x, f".{max(0, -int(exponent) + len(mantissa.replace('.', '').lstrip('-')) - 1)}f")
    mantissa, _, exponent = (digits if "e" in digits else f"{x:e}").partition("e")
    if "e" not in digits:  # repr wrote it positionally (>= 1e16 needs an exponent)
        mantissa, exponent = repr(float(digits)).partition("e")[0], exponent
    sign = "-" if exponent.startswith("-") else "+"
    return f"{mantissa.removesuffix('.0')}e{sign}{int(exponent.lstrip('+-'))}"


def _value(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ",".join(map(_value, value)) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(k)}:{_value(value[k])}" for k in sorted(value)) + "}"
    return _string(str(value))


def spec_form(name: str, fields: dict[str, Any]) -> bytes:
    """C as docs/guide/events.md writes it (the 64-bit case: no wide integers)."""
    ts = fields.get("ts")
    if isinstance(ts, float):
        rounded = round(ts, 6)
        fields = {**fields, "ts": int(rounded) if rounded.is_integer() else rounded}
    return name.encode() + b"\x00" + _value(fields).encode()


# ---------------------------------------------------------------- vectors

def _vectors() -> list[dict[str, Any]]:
    return json.loads(VECTORS.read_text())["vectors"]


def test_vectors_file_is_what_the_code_generates() -> None:
    document = json.loads(VECTORS.read_text())
    assert document["id_version"] == canonical.ID_VERSION == 1
    assert document["vectors"] == canonical.vectors()
    assert len(document["vectors"]) >= 12


def test_every_vector_is_the_written_form_and_both_paths_hash_it() -> None:
    wide = 0
    for vector in _vectors():
        name, fields = vector["name"], canonical.fields_of(vector["fields"])
        form = vector["canonical"].encode()
        assert canonical.canonical_form(name, fields) == form, name
        if all(not isinstance(v, int) or -(1 << 63) <= v < (1 << 64) for v in fields.values()):
            assert spec_form(name, fields) == form, vector
        else:
            wide += 1
        assert hashlib.blake2b(form, digest_size=16).hexdigest() == vector["id"]
        assert content_id(name, fields) == vector["id"], name
        if native.CODEC is not None:
            compiled = native.CODEC.canonical(name, fields)
            assert compiled is None or compiled == form, name
            event = Event(name, dict(fields))
            ensure_ids([event])
            assert event.id == vector["id"]
    assert wide == 1


def test_fixed_vector_ids_are_stable() -> None:
    """Two ids written out: a change of the form (or of the hash) cannot go unnoticed."""
    assert content_id("stampede.xwf.start", {"ts": 1678081413, "xwf.id": "x", "restart_count": 0}) == \
        hashlib.blake2b(b'stampede.xwf.start\x00{"restart_count":0,"ts":1678081413,"xwf.id":"x"}',
                        digest_size=16).hexdigest()
    assert _vectors()[0]["id"] == content_id("stampede.xwf.start", canonical.fields_of(_vectors()[0]["fields"]))


def test_the_codecs_own_blake2b_is_hashlibs() -> None:
    """The codec hashes ids itself (_blake2b.h): every length around its 128-byte blocks, and random data."""
    if native.CODEC is None:
        return  # pure Python: hashlib is the only hash
    import random

    rng = random.Random(28)
    lengths = [*range(0, 300), 383, 384, 385, 1023, 1024, 1025, 65_537]
    for size in lengths:
        for data in (bytes(rng.getrandbits(8) for _ in range(size)), b"\xff" * size, b"\x00" * size):
            assert native.CODEC.hash_hex(data) == hashlib.blake2b(data, digest_size=16).hexdigest(), size
    for vector in _vectors():
        fields = canonical.fields_of(vector["fields"])
        assert native.CODEC.event_id(vector["name"], fields) in (vector["id"], None), vector["name"]


# ---------------------------------------------------------------- the corpus

def corpus_id_listing(shared: Path) -> bytes:
    """`file:line:id` of every event of the corpus and golden streams (BP and JSON lines)."""
    files = sorted(p for root in (shared / "corpus", shared / "golden") for p in root.rglob("*")
                   if p.suffix in (".bp", ".json") and p.is_file())
    out = []
    for path in files:
        parse = bp.parse_line if path.suffix == ".bp" else jsonenc.parse_line
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            try:
                event_id = parse(line).id
            except ValueError:
                event_id = "-"
            out.append(f"{path.relative_to(shared)}:{number}:{event_id}")
    return "\n".join(out).encode()


def test_corpus_ids_are_unchanged(shared: Path) -> None:
    listing = corpus_id_listing(shared)
    assert listing.count(b"\n") + 1 == 10235
    assert listing.count(b":-\n") < 50  # nearly every line is an event
    assert hashlib.sha256(listing).hexdigest() == CORPUS_IDS_SHA256
