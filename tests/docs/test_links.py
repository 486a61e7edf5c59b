"""Every relative link of README.md, CONTRIBUTING.md, CHANGELOG.md and docs/**/*.md points to a file that exists
and, for a Markdown target with `#anchor`, to one of its headings (GitHub's anchors)."""

from __future__ import annotations

from pathlib import Path

from streamer.docs.links import broken_links, documents, links_of, slugs

ROOT = Path(__file__).resolve().parents[2]


def test_every_relative_link_and_anchor_of_the_docs_resolves() -> None:
    pages = documents(ROOT)
    assert ROOT / "README.md" in pages and ROOT / "docs" / "README.md" in pages
    assert len(pages) >= 20, "docs/ is the documentation: a page per command, operations, internals, reference"
    checked = sum(len(links_of(page.read_text(encoding="utf-8"))) for page in pages)
    assert checked >= 100
    assert broken_links(ROOT) == []


def test_the_checker_reports_a_missing_file_a_missing_anchor_and_ignores_code(tmp_path: Path) -> None:
    """The check above cannot pass vacuously: a broken link in a page is found, one in code is not a link."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "# Top\n\n## Set up `now` (fresh)\n\n[ok](docs/a.md#a-heading) [self](#set-up-now-fresh) "
        "[gone](docs/missing.md) [bad anchor](docs/a.md#nowhere) [web](https://example.org/x.md)\n\n"
        "```\n[not a link](nowhere.md)\n```\n\n`[nor this](nowhere.md)`\n", encoding="utf-8")
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## A heading\n\n## A heading\n\n[up](../README.md#top)"
                                            " [second](#a-heading-1)\n", encoding="utf-8")
    assert sorted(broken_links(tmp_path)) == [
        "README.md:5: docs/a.md#nowhere: no heading with that anchor in docs/a.md",
        "README.md:5: docs/missing.md: no such file",
    ]


def test_github_anchors() -> None:
    assert slugs("# Collecting from a queue (`streamer load amqp://…/QUEUE`)\n## Options\n## Options\n") == {
        "collecting-from-a-queue-streamer-load-amqpqueue", "options", "options-1"}
    assert slugs("```\n# a comment\n```\n### Spooling while a server is away (`?spool=DIR`)\n") == {
        "spooling-while-a-server-is-away-spooldir"}
