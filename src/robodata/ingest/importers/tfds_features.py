"""TFDS `features.json`: the image and tensor shapes an RLDS dataset declares per step key.

TFDS writes its FeaturesDict as proto JSON: named features under `featuresDict.features`, a
sequence (RLDS `steps`) under `sequence.feature`, an Image feature as
`{"image": {"shape": {"dimensions": ["256", "256", "3"]}, "encodingFormat": "jpeg"}}`, with -1
for a free dimension, a Tensor as `{"tensor": {"shape": {"dimensions": ["7"]}, "dtype": "float32",
"encoding": "none"}}` and a Scalar as a tensor of shape `{}`. The RLDS importer checks the decoded
frames and each step's values against these (a dataset whose data is not what it declares is refused
naming the field, as MCAP metadata is). A features.json nested deeper than MAX_DEPTH or larger than
MAX_BYTES is refused naming the file: it would take every episode of its dataset with it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from robodata.ingest.raw import RawEpisodeError

Shape = tuple[int | None, ...]
MAX_DEPTH = 64  # TFDS nests a few levels per feature; no dataset comes near
MAX_BYTES = 16 << 20


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


def _shapes(doc: object, kind: str) -> dict[str, Shape]:
    """Declared shapes of every `kind` ("image" | "tensor") feature, by its path."""
    out: dict[str, Shape] = {}

    def walk(node: object, path: tuple[str, ...], depth: int) -> None:
        if not isinstance(node, dict) or depth > MAX_DEPTH:
            return
        decl = node.get(kind)
        if isinstance(decl, dict) and "shape" in decl and decl.get("encoding", "none") in ("none", "", None):
            shape = decl["shape"]  # a Scalar's is {}: proto JSON leaves out an empty dimensions list
            dims = () if kind == "tensor" and shape == {} else _dims(shape)
            if dims is not None:
                out["/".join(path)] = dims
        for key in ("featuresDict", "sequence", "feature"):
            walk(node.get(key), path, depth + 1)
        features = node.get("features")
        if isinstance(features, dict):
            for name, sub in features.items():
                walk(sub, (*path, str(name)), depth + 1)

    walk(doc, (), 0)
    return out


def image_shapes(doc: object) -> dict[str, Shape]:
    """`{"steps/observation/image": (256, 256, 3), ...}` of every Image feature in a features.json."""
    return _shapes(doc, "image")


def tensor_shapes(doc: object) -> dict[str, Shape]:
    """`{"steps/action": (7,), "steps/is_last": (), ...}` of every Tensor / Scalar feature stored as
    values (encoding none; a bytes- or zlib-encoded tensor is one serialized blob a step)."""
    return _shapes(doc, "tensor")


def load_features(dataset_dir: Path) -> object:
    """`<dataset_dir>/features.json` as JSON; None when absent or not JSON (nothing declared).
    RawEpisodeError naming the file when it is over MAX_BYTES or nested too deeply to read."""
    f = dataset_dir / "features.json"
    try:
        size = f.stat().st_size
        if size > MAX_BYTES:
            raise RawEpisodeError(f"{f}: {size} bytes, over {MAX_BYTES} (no TFDS dataset declares that much)")
        return json.loads(f.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    except RecursionError:
        raise RawEpisodeError(f"{f}: JSON nested too deeply to read (TFDS nests a few levels per feature)") from None


def declared_image_shapes(dataset_dir: Path) -> dict[str, Shape]:
    """image_shapes of `<dataset_dir>/features.json`; {} when absent or not JSON (nothing declared)."""
    return image_shapes(load_features(dataset_dir))


def values_per_step(shape: Shape) -> int | None:
    """How many values a step of a declared tensor holds; None when a dimension is free."""
    return None if any(d is None for d in shape) else math.prod(d for d in shape if d is not None)


def contradicts(declared: Shape, h: int, w: int) -> bool:
    """A declared (H, W, ...) whose fixed height or width differs from the decoded frame's."""
    return len(declared) >= 2 and any(d is not None and d != got for d, got in zip(declared[:2], (h, w), strict=True))
