"""The kernel sources: short files, few conditionals, one spelling of tile sizes, every define read."""

from __future__ import annotations

import re

import pytest

from polygemm.backends.cuda.compiler import _local_includes
from polygemm.backends.cuda.variants import KERNEL_DIR, kernel_specs


CONDITIONAL = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b", re.M)


SOURCES = sorted(p for p in KERNEL_DIR.rglob("*") if p.suffix in (".cu", ".cuh"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(KERNEL_DIR)))
def test_each_kernel_file_is_short_with_few_conditionals(path):
    text = path.read_text()
    assert len(text.splitlines()) <= 600, f"{path.name}: over 600 lines; split it into parts"
    assert len(CONDITIONAL.findall(text)) <= 15, f"{path.name}: over 15 #if/#ifdef/#ifndef/#elif; move a concern to a part"


def test_every_define_of_a_row_is_read_by_its_source():
    unread = {}
    for name, spec in kernel_specs().items():
        text = "\n".join(p.read_text() for p in _local_includes(spec.source))
        missing = [m for m in dict(spec.defines) if not re.search(rf"\b{m}\b", text)]
        if missing:
            unread[name] = missing
    assert not unread, f"defines no source reads: {unread}"


def test_tile_sizes_have_one_spelling():
    """The tile vocabulary of kernels/README.md: no kernel spells a tile size the older ways."""
    old = re.compile(r"\b(HG2?_B[MNK]|HG2?_STAGES|HG2_CLUSTER(_N)?|HG_WARPS_[MN]|CM_CPASYNC_BLOCK_[MNK]|kBlock[MNK]|kTb[MNK]|kStep)\b")
    found = {str(p.relative_to(KERNEL_DIR)): sorted({m.group(0) for m in old.finditer(p.read_text())}) for p in SOURCES}
    assert not {k: v for k, v in found.items() if v}
    readme = (KERNEL_DIR / "README.md").read_text()
    for name in ("PG_BM", "PG_BN", "PG_BK", "PG_WM", "PG_WN", "PG_STAGES", "PG_CLUSTER_M", "PG_CLUSTER_N"):
        assert name in readme
