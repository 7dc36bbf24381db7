"""Small PNGs for previews: a strip of thumbnails (PIL) and line/bar plots (matplotlib, Agg)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from PIL import Image


def strip_png(rows: Sequence[Sequence[np.ndarray]], height: int = 64) -> bytes:
    """RGB frames as a grid PNG: one row per inner sequence, each frame scaled to `height` px."""
    thumbs: list[list[Image.Image]] = []
    for row in rows:
        out = []
        for f in row:
            im = Image.fromarray(np.asarray(f, dtype=np.uint8))
            w = max(1, round(im.width * height / max(im.height, 1)))
            out.append(im.resize((w, height), Image.Resampling.BILINEAR))
        thumbs.append(out)
    width = max((sum(t.width + 2 for t in row) for row in thumbs), default=1)
    canvas = Image.new("RGB", (max(width, 1), max(len(thumbs), 1) * (height + 2)), (24, 24, 24))
    for r, row in enumerate(thumbs):
        x = 0
        for t in row:
            canvas.paste(t, (x, r * (height + 2)))
            x += t.width + 2
    buf = io.BytesIO()
    canvas.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def _figure(width_in: float, height_in: float):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, *plt.subplots(figsize=(width_in, height_in), dpi=72)


def _png(plt, fig) -> bytes:
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()


def lines_png(series: dict[str, tuple[np.ndarray, np.ndarray]], title: str, ylabel: str) -> bytes:
    """{label: (t seconds, values (N,) or (N, D))} as one small line plot."""
    plt, fig, ax = _figure(6, 2.2)
    for label, (t, v) in series.items():
        v = np.asarray(v).reshape(len(t), -1)
        for j in range(v.shape[1]):
            ax.plot(t, v[:, j], linewidth=0.7, label=label if j == 0 else None)
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("s", fontsize=7)
    ax.set_ylabel(ylabel, fontsize=7)
    ax.tick_params(labelsize=6)
    if series:
        ax.legend(fontsize=5, loc="upper right")
    return _png(plt, fig)


def bars_png(panels: dict[str, dict[str, float]], hist: tuple[str, np.ndarray] | None = None) -> bytes:
    """Bar charts side by side ({title: {label: value}}), then an optional histogram (title, values)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(panels) + (1 if hist is not None else 0)
    fig, axes = plt.subplots(1, max(n, 1), figsize=(2.4 * max(n, 1), 2.0), dpi=72, squeeze=False)
    for ax, (title, counts) in zip(axes[0], panels.items(), strict=False):
        items = sorted(counts.items(), key=lambda kv: -kv[1])[:12]
        ax.bar(range(len(items)), [v for _, v in items])
        ax.set_xticks(range(len(items)), [k[:12] for k, _ in items], rotation=60, fontsize=5)
        ax.set_title(title, fontsize=7)
        ax.tick_params(labelsize=5)
    if hist is not None:
        ax = axes[0][len(panels)]
        ax.hist(hist[1], bins=20)
        ax.set_title(hist[0], fontsize=7)
        ax.tick_params(labelsize=5)
    return _png(plt, fig)
