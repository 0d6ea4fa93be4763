"""The documents stand on their own: nothing tracked points outside the repository, and links resolve.

Every relative link of README.md and docs/*.md must name a file of the repository, and an anchor
(`protocol.md#8-rejection-codes`) a heading of its target, as GitHub spells headings' anchors.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Written in two pieces so that this file does not hold what it looks for.
OUTSIDE = ("shared" + "/spec", "../" + "shared", "/work/" + "shared")

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")
INLINE = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)


def tracked() -> list[Path]:
    """The repository's tracked files that exist in the working tree."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    names = [name for name in listed.stdout.decode().split("\0") if name]
    return [ROOT / name for name in names if (ROOT / name).is_file()]


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def links(text: str) -> list[str]:
    """The link targets of a Markdown text, code blocks and code spans left out."""
    prose = CODE.sub("", FENCE.sub("", text))
    return INLINE.findall(prose) + REFERENCE.findall(prose)


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown text (a repeated one gets -1, -2, ...)."""
    found: set[str] = set()
    for line in FENCE.sub("", text).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in found:
            n += 1
            anchor = f"{slug}-{n}"
        found.add(anchor)
    return found


def test_no_tracked_file_points_outside_the_repository() -> None:
    files = tracked()
    assert ROOT / "README.md" in files and ROOT / "docs" / "rules.md" in files
    offending = [
        f"{path.relative_to(ROOT)}: {needle}"
        for path in files
        for needle in OUTSIDE
        if needle.encode() in path.read_bytes()
    ]
    assert not offending, offending


@pytest.mark.parametrize("doc", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_of_a_document_resolves(doc: Path) -> None:
    text = doc.read_text()
    broken: list[str] = []
    for target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists() or ROOT not in (file, *file.parents):
            broken.append(f"{target}: no such file in the repository")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(f"{target}: no such heading in {file.relative_to(ROOT)}")
    assert not broken, broken


def test_the_link_checker_sees_links_and_headings_as_github_does() -> None:
    text = "## 8. Rejection codes\n### 5.4 Skill: what `skill` 6 doubles\n## Notes\n## Notes\n"
    assert anchors(text) == {"8-rejection-codes", "54-skill-what-skill-6-doubles", "notes", "notes-1"}
    prose = "See [the rules](rules.md#1-the-board), ![a plot](load.png) and `[not](a-link.md)`.\n"
    assert links(prose + "```\n[nor](this.md)\n```\n[ref]: operations.md\n") == [
        "rules.md#1-the-board",
        "load.png",
        "operations.md",
    ]


def test_the_readme_and_the_protocol_link_to_the_rules() -> None:
    assert "docs/rules.md" in links((ROOT / "README.md").read_text())
    assert any(target.startswith("rules.md") for target in links((ROOT / "docs" / "protocol.md").read_text()))
