"""Export a mixed manifest per corpus: one LeRobot dataset per robot type, or a refusal naming the conflict.

A LeRobot dataset has one robot_type, one camera set, one state / action width and one rate, so a
manifest that mixes corpora is split by `robot_type` (the catalog's, "" as `unknown`) and each part
exported on its own (robodata.export.lerobot: validated before anything is written). A part whose
episodes still differ (two camera sets under one robot type, another width) is refused with the
exporter's reason, which names the episode and the field; the other parts are written. Nothing is
renamed: each dataset keeps its source's camera names and its true robot_type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robodata.errors import RobodataError
from robodata.export.lerobot import export_lerobot
from robodata.names import check_name


def export_per_corpus(rows: list[dict[str, Any]], out_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Export `rows` (manifest rows as dicts, with `robot_type`) as `<out_dir>/<robot_type>/`.

    Returns:
        {robot_type: {"rows", "dir"} for a written dataset, or {"rows", "refused": reason}}.

    Raises:
        UnsafeNameError: a robot_type that cannot name a folder.
    """
    parts: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        parts.setdefault(str(r.get("robot_type") or "unknown"), []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for robot_type, part in sorted(parts.items()):
        folder = Path(out_dir) / check_name(robot_type, field="robot_type", source="manifest")
        try:
            result = export_lerobot(part, folder, robot_type=None if robot_type == "unknown" else robot_type)
        except RobodataError as exc:
            out[robot_type] = {"rows": len(part), "refused": str(exc)}
            continue
        out[robot_type] = {"rows": len(part), "dir": result["dir"]}
    return out
