"""TFDS `features.json`: the image shapes an RLDS dataset declares per step key.

TFDS writes its FeaturesDict as proto JSON: named features under `featuresDict.features`, a
sequence (RLDS `steps`) under `sequence.feature`, an Image feature as
`{"image": {"shape": {"dimensions": ["256", "256", "3"]}, "encodingFormat": "jpeg"}}`, with -1
for a free dimension. The RLDS importer checks the decoded frames against these (a dataset whose
frames are not the size it declares is refused naming the field, as MCAP metadata is).
"""

from __future__ import annotations

import json
from pathlib import Path

Shape = tuple[int | None, ...]


def _dims(shape: object) -> Shape | None:
    """[256, 256, 3], {"dimensions": ["256", "256", "3"]}; -1 / None / anything else -> None (free)."""
    if isinstance(shape, dict):
        shape = shape.get("dimensions")
    if not isinstance(shape, list):
        return None
    out: list[int | None] = []
    for d in shape:
        try:
            v = int(d)
        except (TypeError, ValueError):
            v = -1
        out.append(v if v >= 0 else None)
    return tuple(out)


def image_shapes(doc: object) -> dict[str, Shape]:
    """`{"steps/observation/image": (256, 256, 3), ...}` of every Image feature in a features.json."""
    out: dict[str, Shape] = {}

    def walk(node: object, path: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        img = node.get("image")
        if isinstance(img, dict) and "shape" in img:
            dims = _dims(img["shape"])
            if dims is not None:
                out["/".join(path)] = dims
        for key in ("featuresDict", "sequence", "feature"):
            walk(node.get(key), path)
        features = node.get("features")
        if isinstance(features, dict):
            for name, sub in features.items():
                walk(sub, (*path, str(name)))

    walk(doc, ())
    return out


def declared_image_shapes(dataset_dir: Path) -> dict[str, Shape]:
    """image_shapes of `<dataset_dir>/features.json`; {} when absent or not JSON (nothing declared)."""
    try:
        doc = json.loads((dataset_dir / "features.json").read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return image_shapes(doc)


def contradicts(declared: Shape, h: int, w: int) -> bool:
    """A declared (H, W, ...) whose fixed height or width differs from the decoded frame's."""
    return len(declared) >= 2 and any(d is not None and d != got for d, got in zip(declared[:2], (h, w), strict=True))
