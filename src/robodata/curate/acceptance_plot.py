"""Yield-vs-target plot for the site acceptance asset (PNG, embeddable as markdown)."""

from __future__ import annotations

import base64
import io

import polars as pl


def yield_png(shifts: pl.DataFrame, max_robots: int = 12) -> bytes:
    """Passes per shift for each robot (lines) against the customer target (dashed).

    Args:
        shifts: yield rows (YIELD_SCHEMA).
        max_robots: plot at most this many robots.

    Returns:
        The PNG bytes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=90)
    try:
        robots = shifts.group_by("robot").agg(pl.col("passes").sum()).sort("passes", descending=True)
        for robot in robots["robot"].head(max_robots).to_list():
            r = shifts.filter(pl.col("robot") == robot).sort("shift_start")
            ax.plot(r["shift_start"].to_list(), r["passes"].to_list(), marker=".", linewidth=1, label=robot)
        if shifts.height:
            for target in sorted(set(shifts["target_passes"].to_list())):
                ax.axhline(target, linestyle="--", color="black", linewidth=1)
            ax.text(
                0.01,
                0.95,
                f"target {', '.join(map(str, sorted(set(shifts['target_passes']))))}/shift",
                transform=ax.transAxes,
                va="top",
                fontsize=8,
            )
        ax.set_ylabel("passes per shift")
        ax.set_title("site acceptance: passes per robot and shift")
        if shifts.height:
            ax.legend(fontsize=6, ncol=4, loc="lower right")
        fig.autofmt_xdate()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()
    finally:
        plt.close(fig)


def png_markdown(png: bytes, alt: str = "yield vs target") -> str:
    """`png` as an inline markdown image (base64 data URI) with alt text `alt`."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})"
