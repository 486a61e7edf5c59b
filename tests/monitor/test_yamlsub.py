"""The kickstart-subset YAML loader gives exactly what PyYAML gives, or steps aside."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.monitor.parsers import kickstart, yamlguard, yamlsub
from streamer.synth import SCENARIOS, generate
from tests.support.examples import examples


def _records(root: Path) -> list[tuple[Path, str, str]]:
    out = []
    for path in sorted(root.rglob("*.out*")):
        if path.is_file() and ".out" in path.name:
            for kind, chunk in kickstart.split_records(path.read_text(errors="replace")):
                if kind in ("invocation", "multipart"):
                    out.append((path, kind, chunk))
    return out


def _same_as_pyyaml(records: list[tuple[Path, str, str]]) -> int:
    fast = 0
    for path, kind, chunk in records:
        reference = yaml.load(chunk, Loader=yamlguard.Loader)
        if kind == "invocation":
            ours = yamlsub.load(chunk, kickstart._KEEP, kickstart._yaml_scalar)
            assert kickstart.from_yaml(ours[0]) == kickstart.from_yaml(reference[0]), path
        else:
            assert yamlsub.load(chunk, True, kickstart._yaml_scalar) == reference, path
        fast += 1
    return fast


def test_every_corpus_record_reads_as_pyyaml_reads_it(corpus: Path) -> None:
    records = _records(corpus / "pegasus")
    assert len(records) >= 30
    assert _same_as_pyyaml(records) == len(records)  # no corpus record needs the fallback


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - {"xml_kickstart"}))
def test_every_synthetic_record_reads_as_pyyaml_reads_it(tmp_path: Path, scenario: str) -> None:
    records = _records(generate(tmp_path / scenario, jobs=6, scenario=scenario, seed=3))
    assert records
    _same_as_pyyaml(records)


@pytest.mark.parametrize("text", [
    "a: 1\nb: 1.50\nc: True\nd: ~\ne: null\nf: no\ng: 0o022\nh: 0x1F\ni: 2023-11-14T22:14:05+00:00\n"
    "j: 10.0.0.15\nk: .5\nl: -3\nm: 1_000\nn: 1:30\no: ''\np: 'it''s'\nq: \"x y\"\nr:\ns: .inf\n",
    "k:\n- 1\n- two\n-\n  x: 1\n- y: 2\n  z: [1]\n",  # flow value inside: PyYAML decides the whole
    "data: |\n  line 1\n\n    indented\n  last\nnext: 2\n",
    "data: |-\n  no newline\nother: x\n",
    'esc: "a\\tb\\"c"\nuni: "é ü"\n',
    "top:\n  - a: 1\n    b:\n      - 1\n      - 2\n  - c: 3\n",
])
def test_scalar_and_structure_forms(text: str) -> None:
    expected = yaml.load(text, Loader=yamlguard.Loader)
    try:
        ours = yamlsub.load(text, True, kickstart._yaml_scalar)
    except yamlsub.Unsupported:
        ours = yaml.load(text, Loader=yamlguard.Loader)  # what the monitor does then
    assert ours == expected


@pytest.mark.parametrize("text", [
    "a: {flow: 1}\n", "a: &x 1\nb: *x\n", "a: !!str 1\n", "a: >\n  folded\n", "a: 1 # comment\n",
    "a: plain\n  continued\n", "? complex\n: key\n", "a: 1\n\tb: 2\n", "---\na: 1\n", "a: b: c\n",
])
def test_outside_the_subset_it_steps_aside(text: str) -> None:
    with pytest.raises(yamlsub.Unsupported):
        yamlsub.load(text)


def test_keep_spec_leaves_out_unread_subtrees() -> None:
    text = "- invocation: True\n  hostname: h\n  environment:\n    PATH: /bin\n  mainjob:\n    pid: 3\n    start: t\n"
    assert yamlsub.load(text, kickstart._KEEP) == [{"invocation": True, "hostname": "h", "mainjob": {"start": "t"}}]


def test_fast_record_split_agrees_with_the_line_by_line_split(corpus: Path, tmp_path: Path) -> None:
    paths = [p for p in sorted((corpus / "pegasus").rglob("*.out*")) if p.is_file() and ".out" in p.name]
    for scenario in sorted(SCENARIOS):
        root = generate(tmp_path / scenario, jobs=6, scenario=scenario, seed=3)
        paths += [p for p in sorted(root.rglob("*.out*")) if p.is_file() and ".out" in p.name]
    fast = 0
    for path in paths:
        text = path.read_text(errors="replace")
        simple = kickstart._split_simple(text)
        if simple is not None:
            assert simple == kickstart._split_lines(text), path
            fast += 1
    assert fast > len(paths) // 2
    odd = "- invocation: True\n  a: 1\nJUNK LINE\n" + kickstart.MULTIPART_MARKER + "\n- x: 1\n"
    assert kickstart._split_simple(odd) is None
    assert kickstart.split_records(odd) == [("invocation", "- invocation: True\n  a: 1\n"), ("multipart", "- x: 1\n")]


# ---------------------------------------------------------------- the subset loader == PyYAML, or steps aside

def _subset(text: str) -> object:
    """yamlsub's reading of `text` (whole, keep=True), or the class of its error."""
    try:
        return yamlsub.load(text, True, kickstart._yaml_scalar)
    except (yamlsub.Unsupported, yaml.YAMLError) as exc:
        return type(exc)


def _refused(result: object) -> bool:
    """An error, or None: no document (kickstart then has PyYAML read the text)."""
    return result is None or isinstance(result, type) and issubclass(result, (yamlsub.Unsupported, yaml.YAMLError))


def _agrees_with_pyyaml(text: str) -> None:
    got = _subset(text)
    if got is yamlsub.Unsupported:
        return  # stepped aside: PyYAML reads it
    assert got == yaml.load(text, Loader=yamlguard.Loader), text


EDGE_TEXTS = [
    "a: 1\nb: 1.50\nc: True\nd: ~\nf: no\ng: 0o022\ni: 2023-11-14T22:14:05+00:00\nl: -3\no: ''\np: 'it''s'\nr:\n",
    "k:\n- 1\n- two\n-\n  x: 1\n- y: 2\n", "data: |\n  line 1\n\n    indented\n  last\nnext: 2\n",
    "data: |-\n  no newline\nother: x\n", "data: |\n\nx: 1\n", "data: |\n x\n", "d: |\n  a\r\n", "d: |+\n  a\n",
    'esc: "a\\tb"\nuni: "é ü"\nü: ü\n', "top:\n  - a: 1\n    b:\n      - 1\n  - c: 3\n", "a :\n", "'q': 1\n",
    "'it''s': 2\n", '"k":\n  x: 1\n', "- - 1\n", "- # c\n", "-\n-\n", "a:\n- 1\n- 2\nb: 3\n", "a: 1\n  b: 2\n",
    "a: 1\r\nb:  2 \t\n", "   \n\n", "", "- a\n  - b\n", "a: {x}\n", "a: >\n  f\n", "x: 'unterminated\n",
    "---\n", "...\n", "a: b: c\n", "a:b\n", ":\n", ": a\n", "a:\n  |\n", "k: v\n\tk2: v\n", "\ud800: 1\n",
]


@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_edge_forms_read_as_pyyaml_or_step_aside(text: str) -> None:
    try:
        yaml.load(text, Loader=yamlguard.Loader)
    except yaml.YAMLError:
        assert _refused(_subset(text)), text  # never a value PyYAML refuses
        return
    except UnicodeEncodeError:  # a lone surrogate: no file decodes to one
        return
    _agrees_with_pyyaml(text)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from(
    ["a: 1", "b:", "- x", "-", "- c: 2", "d: |", "d: |-", "text", "e: 'q''", 'f: "x y"', "# c", "g: ~",
     "h: [1]", "k : v", "\t", "ü: é", "i: 0x1", "j:  2 ", ": x", "'k': v", "- - z"])), max_size=12))
def test_random_layouts_read_as_pyyaml_or_step_aside(lines: list[tuple[int, str]]) -> None:
    text = "".join(" " * indent + content + "\n" for indent, content in lines)
    try:
        yaml.load(text, Loader=yamlguard.Loader)
    except yaml.YAMLError:
        assert _refused(_subset(text)), text
        return
    _agrees_with_pyyaml(text)
