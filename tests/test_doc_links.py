"""The reference docs hold together: every relative link in
docs/BENCHMARKS.md, docs/DESIGN.md and the decision records, and every
link from any doc into them, names a file that exists and, with
`#anchor`, a heading or an `<a id="...">` of that file (GitHub's heading
slugs); and no doc speaks of the development sessions the project was
written in (FTP sessions are the protocol's)."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md"),
               *(ROOT / "docs" / "decisions").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
REFERENCE = {ROOT / "docs" / "BENCHMARKS.md", ROOT / "docs" / "DESIGN.md",
             *(ROOT / "docs" / "decisions").glob("*.md")}
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    found = set(re.findall(r'<a\s+id="([^"]+)"', text))
    seen: dict[str, int] = {}
    for line in text.splitlines():
        if m := re.match(r"#{1,6}\s+(.*)", line):
            base = slug(m.group(1))
            n = seen.get(base, 0)
            found.add(base if n == 0 else f"{base}-{n}")  # GitHub numbers repeated headings
            seen[base] = n + 1
    return found


def links(doc: pathlib.Path) -> list[tuple[int, str]]:
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), doc.read_text())
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in LINK.finditer(text)]


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_links_into_and_out_of_the_reference_docs_reach_their_anchor(doc):
    broken = []
    for line, target in links(doc):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if doc not in REFERENCE and dest not in REFERENCE:
            continue  # another doc's own links are its owner's to check
        if not dest.exists():
            broken.append(f"{doc.name}:{line}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{doc.name}:{line}: {target} (no such anchor)")
    assert not broken, "\n".join(broken)


# Development sessions: numbered ones, or one named as the time work was done in.
SESSION = re.compile(r"\bsessions? (?:#?\d+\b|of (?:work|development))"
                     r"|\b(?:development|coding|work) sessions?\b", re.I)


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_no_doc_speaks_of_development_sessions(doc):
    hits = [f"{doc.name}:{n}: {line.strip()}" for n, line in enumerate(doc.read_text().splitlines(), 1)
            if SESSION.search(line)]
    assert not hits, "\n".join(hits)


def test_the_session_rule_leaves_ftp_sessions_alone():
    assert not SESSION.search("this session's data connections") and not SESSION.search("16 sessions")


def test_the_slugs_are_githubs():
    assert slug("1 Gbit/s, 0.5 ms: CPU, not the window") == "1-gbits-05-ms-cpu-not-the-window"
    assert slug("The peer's CPU") == "the-peers-cpu"
    assert slug("-P auto beside other traffic") == "-p-auto-beside-other-traffic"
    assert slug("`drsftp copy` and **TLS**") == "drsftp-copy-and-tls"
