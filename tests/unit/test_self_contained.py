"""The repository cites only itself: code and docs name no file outside it, and every
``<doc>.md §N.M`` citation points at a doc that exists and has that numbered section.

Scanned: every text file under src/, docs/ and examples/, and README.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = (
    "src",
    "docs",
    "examples",
    "tests",
    "bench",
    "fuzz",
    "integration",
    "release",
    "native/src",
)
TEXT_SUFFIXES = {".py", ".pyi", ".md", ".txt", ".toml", ".cfg", ".ini", ".proto", ".sh", ".yml"}

# What points outside the repository (or at a document it does not ship).
OUTSIDE = {
    "an absolute /work/ path": re.compile(r"/work/"),
    "the shared folder": re.compile(r"\.\./shared|(?<![\w-])shared/[\w.-]+"),
    "the external protocol notes": re.compile(r"protocol notes", re.IGNORECASE),
    "an external contract document": re.compile(r"(?<![\w/])(?:API|ARCHITECTURE)\.md"),
}
# ``docs/x.md §2.4``, ``(``docs/protocol/iggy.md`` §1.3)``, ``[iggy.md](protocol/iggy.md) §2``
CITATION = re.compile(r"([\w./-]+\.md)[`'\")\]]*\s*§\s?(\d+(?:\.\d+)*)")
DOC_PATH = re.compile(r"(?<![\w./-])docs/[\w./-]+\.md")


#: This test names what it looks for.
SELF = Path(__file__).resolve()


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in SCANNED:
        files.extend(
            p
            for p in sorted((ROOT / top).rglob("*"))
            if p.is_file() and p.suffix in TEXT_SUFFIXES and p.resolve() != SELF
        )
    return files


def headings(doc: Path) -> set[str]:
    """Section numbers of a doc's headings (``## 2.`` → ``2``, ``### 2.4 Title`` → ``2.4``)."""
    found = set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#+\s+(\d+(?:\.\d+)*)\.?\s", line)
        if m:
            found.add(m.group(1))
    return found


def resolve(cited: str, source: Path) -> Path | None:
    """The repository file a ``.md`` citation names, or None."""
    for candidate in (ROOT / cited, source.parent / cited):
        if candidate.is_file() and ROOT in candidate.resolve().parents:
            return candidate.resolve()
    return None


def problems(path: Path, text: str) -> list[str]:
    found = [
        f"{what}: {m.group(0)!r}"
        for what, pattern in OUTSIDE.items()
        for m in pattern.finditer(text)
    ]
    for m in CITATION.finditer(text):
        cited, section = m.group(1), m.group(2)
        doc = resolve(cited, path)
        if doc is None:
            found.append(f"cites {cited} §{section}, which is not a file of the repository")
        elif section not in headings(doc):
            found.append(f"cites {cited} §{section}, which has no such section")
    found.extend(
        f"names {m.group(0)}, which does not exist"
        for m in DOC_PATH.finditer(text)
        if resolve(m.group(0), path) is None
    )
    in_protocol_docs = path.parent == ROOT / "docs" / "protocol"
    if "§" in text and not in_protocol_docs and not DOC_PATH.search(text):
        found.append("cites sections (§) without naming the doc under docs/ they belong to")
    return found


FILES = {str(p.relative_to(ROOT)): p for p in scanned_files()}


def test_the_scan_sees_code_and_docs() -> None:
    assert "README.md" in FILES
    assert "src/streamwire/iggy/protocol/constants.py" in FILES
    assert "docs/protocol/iggy.md" in FILES
    assert {"1", "2.4", "8"} <= headings(ROOT / "docs" / "protocol" / "iggy.md")


@pytest.mark.parametrize("name", sorted(FILES))
def test_cites_only_the_repository(name: str) -> None:
    found = problems(FILES[name], FILES[name].read_text(encoding="utf-8"))
    assert not found, f"{name}: {found}"


@pytest.mark.parametrize(
    "text",
    [
        "Facts from the protocol notes §2.3 (``/work/shared/protocols/iggy.md``).",
        "The target shape is `../shared/ARCHITECTURE.md`.",
        "Reality vs `shared/brokers.md`.",
        '"""The unified API (API.md)."""',
        "See ``liftbridge.md`` §3.5.",  # not a path of the repository
        "See docs/protocol/iggy.md §42.",  # no such section
        "See docs/protocol/nowhere.md.",
        "An eviction (§2.6) ends the session.",  # a section of which doc?
    ],
)
def test_catches(text: str) -> None:
    assert problems(ROOT / "src" / "streamwire" / "x.py", text)


@pytest.mark.parametrize(
    "text",
    [
        "Layout: docs/protocol/iggy.md §6, and §6.3 for checksums.",
        "(``docs/protocol/liftbridge.md`` §1.3)",
        "`docs/protocol/rabbitmq-streams.md` §4.1 says so; see docs/api.md.",
        "the shared codec layer, shared by every protocol",
    ],
)
def test_accepts(text: str) -> None:
    assert problems(ROOT / "src" / "streamwire" / "x.py", text) == []
