"""Every relative link in README.md, docs/ and examples/ resolves to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT


ROOT = REPO_ROOT


DOCS = sorted({ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("examples/**/*.md")})


_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


_CODE = re.compile(r"`[^`\n]*`")


_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


_REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)


_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.I)


def relative_links(text: str) -> list[str]:
    """The relative link targets of a markdown text (code blocks and code spans excluded)."""
    text = _CODE.sub("", _FENCE.sub("", text))
    targets = _INLINE.findall(text) + _REFDEF.findall(text)
    return [t for t in targets if not _EXTERNAL.match(t)]


_MD_SPAN = re.compile(r"`([\w./-]+\.md)`")


_MD_WORD = re.compile(r"(?<![\w./-])([\w./-]+\.md)\b")


def mentioned_files(text: str) -> list[str]:
    """Markdown files a text names outside links and code (plain words, path-only code spans)."""
    text = _FENCE.sub("", text)
    spans = _MD_SPAN.findall(text)
    plain = _INLINE.sub("", _CODE.sub("", text))
    return spans + [w for w in _MD_WORD.findall(plain) if not _EXTERNAL.match(w)]


def _inside(path: Path) -> bool:
    try:
        path.resolve().relative_to(ROOT)
    except ValueError:
        return False
    return True


def broken_links(doc: Path) -> list[str]:
    bad = []
    for name in mentioned_files(doc.read_text(encoding="utf-8")):
        candidates = [doc.parent / name, ROOT / name]
        if not any(_inside(c) and c.exists() for c in candidates):
            bad.append(f"{name}: named in the text but not a file of the repository")
    for target in relative_links(doc.read_text(encoding="utf-8")):
        path = target.split("#", 1)[0].split("?", 1)[0]
        resolved = (ROOT / path.lstrip("/")) if path.startswith("/") else (doc.parent / path)
        resolved = resolved.resolve()
        try:
            resolved.relative_to(ROOT)
        except ValueError:
            bad.append(f"{target}: outside the repository")
            continue
        if not resolved.exists():
            bad.append(f"{target}: no such file")
    return bad


def test_the_checker_sees_links():
    text = "[a](x.md) ![b](img/p.png) [c](https://e.org) [d](#anchor) `[e](code.md)`\n```\n[f](fenced.md)\n```\n[g]: ref.md\n"
    assert relative_links(text) == ["x.md", "img/p.png", "ref.md"]
    assert DOCS and ROOT / "README.md" in DOCS
    mentions = "see ARCHITECTURE.md and `../shared/NOTES.md`; run `polygemm bench --markdown r.md`; [x.md](x.md)"
    assert mentioned_files(mentions) == ["../shared/NOTES.md", "ARCHITECTURE.md"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    assert not broken_links(doc), f"{doc.relative_to(ROOT)}: " + "; ".join(broken_links(doc))
