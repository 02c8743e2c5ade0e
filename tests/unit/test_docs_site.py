"""The documentation site (``make docs``, mkdocs.yml): its API reference renders every public
name of ``streamwire`` (docs/reference.md), and its navigation reaches every guide in docs/.
The build itself runs in CI with warnings as errors (``.ci/run``)."""

from __future__ import annotations

import re
from pathlib import Path

import streamwire

ROOT = Path(__file__).resolve().parents[2]


def test_the_api_reference_renders_every_public_name() -> None:
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    rendered = re.findall(r"^::: streamwire\.(\w+)$", text, flags=re.MULTILINE)
    public = sorted(n for n in streamwire.__all__ if n != "__version__")
    assert sorted(rendered) == public
    assert len(rendered) == len(set(rendered))  # each once


def test_the_site_navigation_reaches_every_guide() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    in_nav = set(re.findall(r":\s*([\w-]+\.md)\s*$", config, flags=re.MULTILINE))
    guides = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert guides == in_nav
