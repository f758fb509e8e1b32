"""``polygemm bench --plot``: TFLOP/s against problem size, one line per variant.

The vendor library is drawn as a thick black line so each rung reads as a fraction of
it. Needs matplotlib (``pip install 'polygemm[plot]'``); rendering uses the Agg backend.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["plot_records"]


def plot_records(records: Sequence[Any], path: str) -> None:
    """Write a PNG of ``records`` (BenchRecord objects) to ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        from .errors import ArgumentError

        raise ArgumentError(f"--plot needs matplotlib ({exc}); install it with pip install 'polygemm[plot]'") from exc
    if not records:
        raise ValueError("no benchmark records to plot")
    shapes = list(dict.fromkeys((r.m, r.n, r.k) for r in records))
    shapes.sort(key=lambda s: s[0] * s[1] * s[2])
    x = {s: i for i, s in enumerate(shapes)}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(shapes) + 3), 5))
    variants = list(dict.fromkeys(r.variant for r in records))
    for v in variants:
        rs = sorted((r for r in records if r.variant == v), key=lambda r: x[(r.m, r.n, r.k)])
        ax.plot([x[(r.m, r.n, r.k)] for r in rs], [r.tflops for r in rs], marker="o", linewidth=1.2, label=v)
    vend = {(r.m, r.n, r.k): r.vendor_tflops for r in records}
    vendor_name = next((r.vendor_variant for r in records if r.vendor_variant), "vendor")
    ax.plot(range(len(shapes)), [vend[s] for s in shapes], color="black", linewidth=3, label=f"{vendor_name} (vendor)")
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels([f"{m}×{n}×{k}" for m, n, k in shapes], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    r0 = records[0]
    ax.set_title(f"polygemm bench: {r0.backend} {r0.dtype} on {r0.device}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
