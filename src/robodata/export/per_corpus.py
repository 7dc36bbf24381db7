"""Export a mixed manifest per corpus: one LeRobot dataset per robot type, or a refusal naming the conflict.

A LeRobot dataset has one robot_type, one camera set, one state / action width and one rate, so a
manifest that mixes corpora is split by `robot_type` (the catalog's; a row that declares none by its
`source_dataset`, else `unknown`, and written with no robot_type) and each part exported on its own
(robodata.export.lerobot: validated before anything is written). A part whose episodes still differ
(two camera sets under one robot type, another width) is refused with the exporter's reason, which
names the episode and the field; the other parts are written. Nothing is renamed: each dataset
keeps its source's camera names and its true robot_type.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from robodata.errors import RobodataError
from robodata.export.lerobot import export_lerobot
from robodata.names import check_name


def part_of(row: dict[str, Any]) -> str:
    """The part a manifest row is exported in: its robot type, else its source_dataset, else `unknown`."""
    return str(row.get("robot_type") or row.get("source_dataset") or "unknown")


def export_per_corpus(
    rows: list[dict[str, Any]], out_dir: str | Path, progress: Callable[[int], Any] = lambda n: None
) -> dict[str, dict[str, Any]]:
    """Export `rows` (manifest rows as dicts, with `robot_type`) as `<out_dir>/<part>/`, a part per
    robot type (see the module docstring).

    Args:
        progress: called with 1 after each episode written (with a refused part's rows once refused).

    Returns:
        {part: {"rows", "robot_type", "dir"} for a written dataset, or {"rows", "robot_type", "refused": reason}}.

    Raises:
        UnsafeNameError: a robot_type that cannot name a folder.
    """
    parts: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        parts.setdefault(part_of(r), []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for name, part in sorted(parts.items()):
        robot_type = str(part[0].get("robot_type") or "") or None
        folder = Path(out_dir) / check_name(name, field="robot_type", source="manifest")
        try:
            result = export_lerobot(part, folder, robot_type=robot_type, progress=progress)
        except RobodataError as exc:
            out[name] = {"rows": len(part), "robot_type": robot_type, "refused": str(exc)}
            progress(len(part))
            continue
        out[name] = {"rows": len(part), "robot_type": robot_type, "dir": result["dir"]}
    return out
