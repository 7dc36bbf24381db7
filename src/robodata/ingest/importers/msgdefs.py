"""Message definitions a recording does not embed (ROS 2 Humble `.db3` bags, vendor packages):
a folder of `.msg` / `.idl` files registered with rosbags' type system.

Layout as in a ROS workspace: `<DIR>/.../<package>/msg/<Type>.msg` is `<package>/msg/<Type>`;
`.idl` files name their own types. Read once per process and folder.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from robodata.errors import ConfigError


def msg_type_name(path: Path) -> str:
    parts = path.with_suffix("").parts
    if len(parts) < 3 or parts[-2] != "msg":
        raise ConfigError(f"{path}: a .msg file must live at <package>/msg/<Type>.msg (names its type)")
    return f"{parts[-3]}/msg/{parts[-1]}"


@lru_cache(maxsize=8)
def load_msgdefs(folder: str) -> dict:
    """Every type defined under `folder` (a rosbags Typesdict); ConfigError naming the file that fails."""
    from rosbags.typesys import get_types_from_idl, get_types_from_msg

    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"--msgs {folder}: not a folder of .msg / .idl files")
    types: dict = {}
    for f in sorted(root.rglob("*")):
        if f.suffix not in (".msg", ".idl") or not f.is_file():
            continue
        try:
            text = f.read_text()
            types.update(get_types_from_idl(text) if f.suffix == ".idl" else get_types_from_msg(text, msg_type_name(f)))
        except ConfigError:
            raise
        except Exception as exc:  # rosbags' parser errors
            raise ConfigError(f"{f}: not a valid message definition ({type(exc).__name__}: {exc})") from None
    if not types:
        raise ConfigError(f"--msgs {folder}: holds no .msg or .idl file")
    return types
