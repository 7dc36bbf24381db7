"""Small images for previews, drawn with PIL: a JPEG strip of thumbnails, PNG line and bar plots."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

import numpy as np
from PIL import Image


def jpeg_markdown(data: bytes, alt: str) -> str:
    """`data` (JPEG) as an inline markdown image (base64 data URI)."""
    return f"![{alt}](data:image/jpeg;base64,{base64.b64encode(data).decode()})"


def strip_jpeg(rows: Sequence[Sequence[np.ndarray]], height: int = 64, quality: int = 70) -> bytes:
    """RGB frames as a grid JPEG (camera frames compress 5-10x better than PNG): one row per inner
    sequence, each frame scaled to `height` px."""
    thumbs: list[list[Image.Image]] = []
    for row in rows:
        out: list[Image.Image] = []
        for f in row:
            im = Image.fromarray(np.asarray(f, dtype=np.uint8))
            w = max(1, round(im.width * height / max(im.height, 1)))
            out.append(im.resize((w, height), Image.Resampling.BILINEAR))
        thumbs.append(out)
    width = max((sum(t.width + 2 for t in line) for line in thumbs), default=1)
    canvas = Image.new("RGB", (max(width, 1), max(len(thumbs), 1) * (height + 2)), (24, 24, 24))
    for r, line in enumerate(thumbs):
        x = 0
        for t in line:
            canvas.paste(t, (x, r * (height + 2)))
            x += t.width + 2
    buf = io.BytesIO()
    canvas.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


_PALETTE = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
]


def lines_png(
    series: dict[str, tuple[np.ndarray, np.ndarray]], title: str, width: int = 480, height: int = 90
) -> bytes:
    """{label: (t seconds, values (N,) or (N, D))} as small line plots, one panel per label,
    drawn with PIL (matplotlib costs ~0.5 s a figure; this costs milliseconds and a few KB)."""
    from PIL import ImageDraw

    panels = list(series.items())
    canvas = Image.new("RGB", (width, max(1, len(panels)) * height + 14), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    draw.text((4, 1), title, fill=(0, 0, 0))
    for k, (label, (t, v)) in enumerate(panels):
        top = 14 + k * height
        v = np.asarray(v, dtype=np.float64).reshape(len(t), -1)
        box = (40, top + 2, width - 4, top + height - 12)
        draw.rectangle(box, outline=(160, 160, 160))
        if not len(t):
            continue
        lo, hi = float(np.nanmin(v)), float(np.nanmax(v))
        span_v = hi - lo or 1.0
        t0, span_t = float(t[0]), float(t[-1] - t[0]) or 1.0
        xs = box[0] + (np.asarray(t) - t0) / span_t * (box[2] - box[0])
        for j in range(v.shape[1]):
            ys = box[3] - (v[:, j] - lo) / span_v * (box[3] - box[1])
            draw.line(list(zip(xs.tolist(), ys.tolist(), strict=True)), fill=_PALETTE[j % len(_PALETTE)], width=1)
        draw.text((2, box[1]), f"{hi:.2g}", fill=(0, 0, 0))
        draw.text((2, box[3] - 10), f"{lo:.2g}", fill=(0, 0, 0))
        draw.text((box[0], box[3] + 1), f"{label}: {t0:.0f}-{float(t[-1]):.0f} s", fill=(60, 60, 60))
    buf = io.BytesIO()
    canvas.quantize(16).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def bars_png(
    panels: dict[str, dict[str, float]], hist: tuple[str, np.ndarray] | None = None, size: tuple[int, int] = (240, 120)
) -> bytes:
    """Bar charts side by side ({title: {label: value}}, the 8 largest), then an optional
    20-bin histogram (title, values); drawn with PIL like `lines_png`."""
    from PIL import ImageDraw

    charts: list[tuple[str, list[tuple[str, float]]]] = [
        (title, sorted(counts.items(), key=lambda kv: -kv[1])[:8]) for title, counts in panels.items()
    ]
    if hist is not None:
        values = np.asarray(hist[1], dtype=np.float64)
        values = values[np.isfinite(values)]
        counts, edges = np.histogram(values, bins=20) if len(values) else (np.zeros(0), np.zeros(1))
        charts.append((hist[0], [(f"{e:.3g}", float(c)) for e, c in zip(edges[:-1], counts, strict=True)]))
    w, h = size
    canvas = Image.new("RGB", (max(1, len(charts)) * w, h), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    for k, (title, items) in enumerate(charts):
        x0 = k * w
        top, bottom = 14, h - 14
        peak = max((v for _, v in items), default=0.0) or 1.0
        draw.text((x0 + 4, 1), f"{title} (max {peak:.3g})", fill=(0, 0, 0))
        bw = (w - 8) / max(len(items), 1)
        for i, (_label, v) in enumerate(items):
            bx = x0 + 4 + i * bw
            draw.rectangle((bx + 1, bottom - (bottom - top) * v / peak, bx + bw - 1, bottom), fill=_PALETTE[0])
        if items and k == len(panels):  # the histogram: its range
            axis = f"{items[0][0]} .. {items[-1][0]}"
        else:  # the bars' labels, largest first
            axis = " ".join(label[:8] for label, _ in items)
        draw.text((x0 + 4, bottom + 1), axis[: w // 6], fill=(60, 60, 60))
    buf = io.BytesIO()
    canvas.quantize(16).save(buf, format="PNG", optimize=True)
    return buf.getvalue()
