"""bench.robustness msgs section: hostile `--msgs` folders (issue 44 items 4 and 9).

Each case is the good vendor folder (robodata.ingest.synth.ros.write_vendor_msgs) plus one thing:
a `.msg` symlinked to a file outside the folder (a passwd-like sentinel), a package folder
symlinked outside, a `.msg` / `.idl` whose text is the sentinel's (does not parse), a 2 MB `.msg`,
a `.msg` that is not UTF-8, a `.msg` outside `<package>/msg/`, and redefinitions of standard types
(std_msgs/Header as ROS 1's with a field more, sensor_msgs/JointState with other fields). Each must be
refused once, up front, by IngestSettings (what `robodata ingest --msgs` builds) as a ConfigError
naming the file, never echoing a line of any file. A folder holding a verbatim copy of a standard
type (ROS 2 Humble's std_msgs/Header) is accepted: a ROS 1 bag and a ROS 2 bag of the vendor type
then both pass (the copy used to conflict with ROS 1's Header in every ROS 1 bag).

    cases               hostile folders
    refused_up_front    of those, refused by IngestSettings with a ConfigError
    contents_echoed     errors holding the sentinel's text (a file's contents)
    reads_outside       folders with a link outside that were accepted
    raw_errors          exceptions outside RobodataError
    refused_per_bag     accepted folders whose bags were quarantined (a folder problem paid per bag)

    python -m bench.robustness --quick --section msgs
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from robodata.errors import ConfigError
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.synth import SynthConfig, make_episode
from robodata.ingest.synth.ros import write_ros1_bag, write_ros2_bag_custom, write_vendor_msgs
from robodata.ingest.tables import IngestPaths

MARK = "robodata-sentinel-7f3a"
SECRET = f"root:x:0:0:{MARK}:/root:/bin/bash\ndaemon:x:1:1:{MARK}:/usr/sbin:/usr/sbin/nologin\n"
HUMBLE_HEADER = "builtin_interfaces/Time stamp\nstring frame_id\n"
TINY = SynthConfig(episodes=1, duration_s=1.0, height=16, width=16, fps=10.0, state_hz=50.0, cameras=("cam",))


def _put(d: Path, rel: str, data: str | bytes) -> None:
    f = d / rel
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(data.encode() if isinstance(data, str) else data)


def _link(d: Path, rel: str, target: Path) -> None:
    (d / rel).parent.mkdir(parents=True, exist_ok=True)
    (d / rel).symlink_to(target)


def _cases(outside: Path) -> dict:
    return {
        "msg_link_outside": lambda d: _link(d, "evil/msg/Pos.msg", outside / "passwd"),
        "package_link_outside": lambda d: _link(d, "evil", outside / "pkg"),
        "msg_is_passwd": lambda d: _put(d, "evil/msg/Pos.msg", SECRET),
        "idl_is_passwd": lambda d: _put(d, "evil/msg/Pos.idl", SECRET),
        "msg_2mb": lambda d: _put(d, "evil/msg/Pos.msg", f"# {MARK}\n" + "float64 x\n" * 200_000),
        "msg_not_utf8": lambda d: _put(d, "evil/msg/Pos.msg", b"float64 x\n\xff\xfe" + MARK.encode()),
        "msg_not_in_package": lambda d: _put(d, "Pos.msg", "float64 x\n"),
        "redefines_header": lambda d: _put(d, "std_msgs/msg/Header.msg", "uint32 seq\n" + HUMBLE_HEADER + "int8 x\n"),
        "redefines_joint_state": lambda d: _put(d, "sensor_msgs/msg/JointState.msg", "float64[] position\n"),
    }


def _bags(land: Path, msgs: Path) -> None:
    write_ros1_bag(make_episode(TINY, 1), land)
    write_ros2_bag_custom(make_episode(TINY, 2), land, msgs)


def run(size: str) -> dict:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="robustness-msgs-") as tmp:
        root = Path(tmp)
        outside = root / "outside"
        _put(outside, "passwd", SECRET)
        _put(outside, "pkg/msg/Pos.msg", SECRET)
        good = write_vendor_msgs(root / "good")
        cases = _cases(outside)
        if size == "smoke":
            cases = dict(list(cases.items())[::2])
        out: dict = {
            "cases": len(cases),
            "refused_up_front": 0,
            "contents_echoed": 0,
            "reads_outside": 0,
            "raw_errors": 0,
        }
        examples: list[str] = []
        for name, edit in cases.items():
            d = root / name
            shutil.copytree(good, d)
            edit(d)
            try:
                IngestSettings(msgs=str(d))
            except ConfigError as exc:
                out["refused_up_front"] += 1
                if MARK in str(exc) or "root:x:0:0" in str(exc):
                    out["contents_echoed"] += 1
                    examples.append(f"{name}: echoed: {str(exc)[:200]}")
                continue
            except Exception as exc:
                out["raw_errors"] += 1
                examples.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            out["reads_outside"] += "outside" in name
            examples.append(f"{name}: accepted")
        # a verbatim copy of a standard type: accepted, and bags of both ROS versions pass
        copy = root / "humble_header_copy"
        shutil.copytree(good, copy)
        _put(copy, "std_msgs/msg/Header.msg", HUMBLE_HEADER)
        land = root / "landing"
        land.mkdir()
        _bags(land, root / "bag_msgs")
        paths = IngestPaths(str(root / "state"))
        settings = IngestSettings(msgs=str(copy))
        write_manifest(paths, "copy", new_items(str(land), LandingCursor()))
        run_batch(paths, "copy", settings, derived=False)
        rows = [r for r in paths.read("qc_results", "copy").to_pylist() if r["stage"] == "summary"]
        out["refused_per_bag"] = sum(not r["passed"] for r in rows)
        out["copy_case_bags_passed"] = sum(bool(r["passed"]) for r in rows)
        examples += [f"copy: {r['reason'][:200]}" for r in rows if not r["passed"]]
        out["examples"] = examples[:6]
        out["wall_s"] = round(time.perf_counter() - started, 1)
        return out
