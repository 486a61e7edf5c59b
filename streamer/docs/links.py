"""Relative links of the Markdown documentation, checked: the file exists and the `#anchor` is one of its headings.

Anchors are GitHub's: the heading's text in lower case, without what is neither a letter, a digit, `_`, `-` nor a
blank, blanks as `-`, and `-1`, `-2`, ... for a heading met again. Code blocks and code spans are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]*(?:\([^()\s]*\)[^()\s>]*)*)>?(?:\s+\"[^\"]*\")?\s*\)")
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks, code spans blanked."""
    out, fence = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fence = not fence
            continue
        if not fence:
            out.append((number, _CODE_SPAN.sub("", line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def slugs(text: str) -> set[str]:
    """The anchors of a page's headings."""
    seen: dict[str, int] = {}
    found = set()
    fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fence = not fence
            continue
        match = None if fence else _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links_of(text: str) -> list[tuple[int, str]]:
    """(line, target) of every link to a relative target (not `https:`, `mailto:`, ...)."""
    return [(number, target) for number, line in _prose(text) for target in _LINK.findall(line)
            if target and not _EXTERNAL.match(target)]


def documents(root: Path) -> list[Path]:
    """The pages checked: the top-level Markdown files and everything under docs/."""
    return sorted([p for p in root.glob("*.md") if p.is_file()] + list((root / "docs").rglob("*.md")))


def broken_links(root: Path) -> list[str]:
    """`PAGE:LINE: TARGET: why` for every link that does not resolve."""
    problems = []
    anchors: dict[Path, set[str]] = {}
    for page in documents(root):
        text = page.read_text(encoding="utf-8")
        for number, target in links_of(text):
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(root)}:{number}: {target}"
            if not dest.exists():
                problems.append(f"{where}: no such file")
                continue
            if anchor and dest.suffix == ".md":
                if dest not in anchors:
                    anchors[dest] = slugs(dest.read_text(encoding="utf-8"))
                if anchor not in anchors[dest]:
                    name = dest.relative_to(root) if dest.is_relative_to(root) else dest
                    problems.append(f"{where}: no heading with that anchor in {name}")
    return problems
