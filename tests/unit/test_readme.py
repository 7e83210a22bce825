"""README's first screen, the links of README and docs/, and the test files they name.

The first screen (the first 40 lines) must tell a newcomer what to install, what to import and
which format to write with, and point at ``make demo``. Every relative link in README.md and
docs/*.md must name a file that exists and, with ``#anchor``, a heading of that file (GitHub's
anchors: lower case, punctuation dropped, spaces as hyphens, ``-1``, ``-2`` for repeats). Every
page of docs/ is listed under README's "More documentation", so none is found only by chance.
A test file a page names (``tests/...``, in prose or code) must exist: a renamed test leaves
the page pointing at nothing otherwise.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FIRST_SCREEN_LINES = 40
DOCS_LIST_HEADING = "## More documentation"
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# A path under tests/ as pages write it: in backticks, a link or prose, maybe with ::test_name.
_TEST_PATH = re.compile(r"\btests/[\w/.-]*\w")


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


def broken_links(page: Path, text: str) -> list[str]:
    """The relative links of ``text`` (the content of ``page``) that name no file or heading."""
    broken = []
    for target in relative_links(text):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and anchor not in anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading with anchor #{anchor} in {file.name}")
    return broken


def section(text: str, heading: str) -> str:
    """The lines under ``heading`` up to the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next(
        (i for i in range(start, len(lines)) if re.match(rf"^#{{1,{len(level)}}} ", lines[i])),
        len(lines),
    )
    return "\n".join(lines[start:end])


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


def test_a_broken_link_is_found() -> None:
    # Guards the checks below against passing because they look at nothing.
    page = ROOT / "README.md"
    text = "[ok](docs/testing.md#using-localkafka-in-your-own-tests) [gone](docs/nowhere.md)\n"
    text += "[bad anchor](docs/testing.md#no-such-heading)\n"
    assert broken_links(page, text) == [
        f"docs/nowhere.md: no file {ROOT / 'docs' / 'nowhere.md'}",
        "docs/testing.md#no-such-heading: no heading with anchor #no-such-heading in testing.md",
    ]
    text = "# T\n## More documentation\n- [a](docs/a.md)\n### sub\n- [b](b.md)\n## Next\n[c](c.md)"
    assert relative_links(section(text, DOCS_LIST_HEADING)) == ["docs/a.md", "b.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = broken_links(page, page.read_text(encoding="utf-8"))
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_readme_lists_every_docs_page() -> None:
    readme = ROOT / "README.md"
    listed = {
        (ROOT / target.partition("#")[0]).resolve()
        for target in relative_links(section(readme.read_text(encoding="utf-8"), DOCS_LIST_HEADING))
    }
    docs = {page.resolve() for page in PAGES if page != readme}
    assert docs, "no pages found in docs/"
    missing = sorted(str(page.relative_to(ROOT)) for page in docs - listed)
    assert not missing, f"README's {DOCS_LIST_HEADING!r} does not list {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_test_file_named_exists(page: Path) -> None:
    named = set(_TEST_PATH.findall(page.read_text(encoding="utf-8")))
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"{page.name} names test files that do not exist: {missing}"
