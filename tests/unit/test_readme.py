"""README's first screen and the links of README and docs/.

The first screen (the first 40 lines) must tell a newcomer what to install, what to import and
which format to write with, and point at ``make demo``. Every relative link in README.md and
docs/*.md must name a file that exists and, with ``#anchor``, a heading of that file (GitHub's
anchors: lower case, punctuation dropped, spaces as hyphens, ``-1``, ``-2`` for repeats).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FIRST_SCREEN_LINES = 40
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a markdown page."""
    seen: Counter[str] = Counter()
    out = set()
    for line in _prose(text):
        heading = re.match(r"^#{1,6} +(.*?) *#*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        out.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return out


def relative_links(text: str) -> list[str]:
    """Link and image targets that are neither URLs nor inside code."""
    targets = []
    for line in _prose(text):
        outside_code = re.sub(r"`[^`]*`", "", line)
        targets += [
            t for t in _LINK.findall(outside_code) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)
        ]
    return targets


def test_first_screen_says_what_to_install_import_write_and_run() -> None:
    first = "\n".join(
        (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN_LINES]
    )
    for needed in ("pip install pykafka-sink", "kafka_sink", 'format("pykafka")', "make demo"):
        assert needed in first, f"README's first {FIRST_SCREEN_LINES} lines lack {needed!r}"
    assert "not this project" in first, "the unrelated pykafka distribution is not named"


def test_anchors_follow_github() -> None:
    text = "# A title\n## Re-running a batch job (`idempotencyKey`)\n## A title\n```\n# code\n```\n"
    assert anchors(text) == {"a-title", "re-running-a-batch-job-idempotencykey", "a-title-1"}
    assert relative_links("[a](x.md#b) `[c](d.md)` ![e](f.png) [g](https://h)") == [
        "x.md#b",
        "f.png",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and anchor not in anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading with anchor #{anchor} in {file.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)
