"""LayoutPlan: the advised layout, and how it applies to episodes with other stream sets."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robodata.container import EpisodeMeta, Layout, TopicGroup, VideoSettings
from robodata.errors import ConfigError

COLD_VIDEO = VideoSettings(codec="h264", gop=60, crf=23, preset="veryfast")


@dataclass
class LayoutPlan:
    pattern: dict[str, Any]  # the ReadPattern it was derived for (as a dict)
    layout: Layout  # concrete layout for the sample episodes' streams
    page_size: int  # advised page cache page size (bytes)
    alternatives: list[dict[str, Any]] = field(default_factory=list)  # label, predicted, measured, storage
    chosen: str = ""  # label of the chosen alternative
    calibration: dict[str, Any] = field(default_factory=dict)
    # what the quality floor (AdvisorConfig.min_psnr_db) was measured against: "source" (frames
    # from the recordings, robodata.layout.sources) or "containers" (frames of stored containers:
    # already one encode from the source, so losses vs the source add up on re-encoding)
    quality_reference: dict[str, Any] = field(default_factory=dict)
    # one layout for several read patterns (robodata.layout.mix): each pattern's name, weight, the
    # pattern and the chosen layout's cost as a fraction of its own best (empty for one pattern;
    # `pattern` then holds what the layout must serve: every stream any of them reads)
    patterns: list[dict[str, Any]] = field(default_factory=list)

    @property
    def version(self) -> str:
        return self.layout.version

    def layout_for(self, meta: EpisodeMeta) -> Layout:
        """The plan's groups restricted to this episode's streams; streams the plan never saw go to
        cold groups (cameras: long GOP; others: long chunks), so any episode can be re-laid."""
        groups: list[TopicGroup] = []
        placed: set[str] = set()
        for g in self.layout.groups:
            present = tuple(s for s in g.streams if s in meta.streams)
            ok = [s for s in present if (meta.streams[s].kind == "video") == (g.video is not None)]
            if ok:
                groups.append(TopicGroup(g.name, tuple(ok), g.chunk_span_s, g.video))
                placed.update(ok)
        rest = [s for s in meta.streams if s not in placed]
        names = {g.name for g in groups}
        cold_v = tuple(s for s in rest if meta.streams[s].kind == "video")
        cold_o = tuple(s for s in rest if meta.streams[s].kind != "video")
        if cold_v:
            groups.append(TopicGroup(_fresh("cold_video", names), cold_v, 4.0, COLD_VIDEO))
        if cold_o:
            groups.append(TopicGroup(_fresh("cold", names), cold_o, 60.0))
        return Layout(groups=tuple(groups))

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "layout": self.layout.to_dict(),
            "layout_version": self.version,
            "page_size": self.page_size,
            "alternatives": self.alternatives,
            "chosen": self.chosen,
            "calibration": self.calibration,
            "quality_reference": self.quality_reference,
            "patterns": self.patterns,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LayoutPlan:
        try:
            return cls(
                pattern=d["pattern"],
                layout=Layout.from_dict(d["layout"]),
                page_size=int(d["page_size"]),
                alternatives=list(d.get("alternatives", [])),
                chosen=d.get("chosen", ""),
                calibration=dict(d.get("calibration", {})),
                quality_reference=dict(d.get("quality_reference", {})),
                patterns=list(d.get("patterns", [])),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"not a layout plan: {exc}") from exc

    def save(self, path: str | Path, storage_options: dict[str, Any] | None = None) -> None:
        """Atomically (readers see the old plan or the new one); a path or s3:// URI."""
        from robodata.storage import objects

        objects.write_bytes(str(path), json.dumps(self.to_dict(), indent=2, sort_keys=True).encode(), storage_options)

    @classmethod
    def load(cls, path: str | Path, storage_options: dict[str, Any] | None = None) -> LayoutPlan:
        from robodata.storage import objects

        try:
            data = json.loads(objects.read_bytes(str(path), storage_options))
        except FileNotFoundError:
            raise ConfigError(f"layout plan not found: {path}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: invalid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: not a layout plan: a JSON object is expected, got {type(data).__name__}")
        try:
            return cls.from_dict(data)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None


def _fresh(name: str, taken: set[str]) -> str:
    out, i = name, 1
    while out in taken:
        i += 1
        out = f"{name}{i}"
    taken.add(out)
    return out
