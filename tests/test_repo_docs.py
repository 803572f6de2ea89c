"""The repository explains itself: the README is a front door (at most 150 lines, linking every
page in docs/), every relative link of the README and the Markdown pages reaches a file of the
repository (and, with a ``#fragment``, a heading of it), and no code, test or page cites a
document that is not in the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
MARKDOWN = [README, *PAGES, ROOT / "benchmarks" / "RESULTS.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
# Citations of documents that live outside the repository: the design notes and the cloud
# references the project was started from. A section sign only ever cites one of them.
OUTSIDE = re.compile(r"DESIGN\.md|DESIGN §|§|(?i:\bseed docs?\b)|\.\./shared/")


def _prose(text: str) -> str:
    """The Markdown without its fenced code blocks (a link inside one is code, not a link)."""
    return FENCE.sub("", text)


def _anchors(text: str) -> set[str]:
    """The fragment of each heading, as GitHub makes it (lower case, punctuation dropped,
    spaces to hyphens, a repeated heading numbered)."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in _prose(text).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text(encoding="utf-8")))


def test_the_readme_is_short():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= 150, f"README.md has {n} lines (at most 150): move detail to a page in docs/"


def test_the_readme_links_every_docs_page():
    assert len(PAGES) >= 15  # the glob found the pages (guards a moved folder)
    linked = {(ROOT / t.split("#")[0]).resolve() for t in _links(README)}
    missing = [p.name for p in PAGES if p.resolve() not in linked]
    assert not missing, f"link these docs pages from README.md's 'Where next': {missing}"


def test_every_relative_link_reaches_a_file_and_heading_of_the_repository():
    broken = []
    for page in MARKDOWN:
        for target in _links(page):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                continue  # http:, https:, mailto: — not a file of the repository
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)} → {target}"
            if not dest.exists():
                broken.append(f"{where}: no such file")
            elif ROOT not in dest.parents and dest != ROOT:
                broken.append(f"{where}: outside the repository")
            elif (fragment and dest.suffix == ".md"
                  and fragment not in _anchors(dest.read_text(encoding="utf-8"))):
                broken.append(f"{where}: no heading #{fragment} in {dest.name}")
    assert not broken, "fix these links:\n" + "\n".join(broken)


def _cited_files() -> list[Path]:
    here = Path(__file__).resolve()
    files = [*MARKDOWN, *(ROOT / "benchmarks").rglob("*.py")]
    for folder in ("src", "tests"):
        files += (ROOT / folder).rglob("*.py")
    return [f for f in files if f.resolve() != here]


def test_nothing_cites_a_document_outside_the_repository():
    hits = []
    for path in _cited_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = OUTSIDE.search(line)
            if m:
                hits.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r} in {line.strip()!r}")
    assert len(_cited_files()) > 100  # the scan read the code (guards a moved folder)
    assert not hits, (
        "these cite a document that is not in the repository: state the fact itself, or link "
        "a page in docs/:\n" + "\n".join(hits)
    )


def test_the_citation_scan_sees_each_form():
    for cited in ("per DESIGN.md §5", "(reference §9.4)", "the seed doc 001", "../shared/x.md"):
        assert OUTSIDE.search(cited), cited
    assert not OUTSIDE.search("see docs/design.md (the layers)")
