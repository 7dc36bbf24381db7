"""bench.lerobot_peer's layouts of our side, as the platform produces them:

- default: what `robodata ingest` writes (IngestSettings().video: the ingestion default,
  H.264 GOP 30, CRF 23, no B-frames), here through our LeRobot importer;
- advised (docs/layout.md, new data of a known read pattern): `robodata advise PATTERN.json
  --source <LeRobot's dataset> --quick --out plan.json` (the sample converted near-lossless, so the
  quality floor is measured against source frames), then our LeRobot importer converts the source
  episodes straight into the plan's layout (robodata.ingest.convert.convert(plan=...), what
  `robodata ingest --plan plan.json` runs per episode): one encode from the source;
- relaid (data already stored; `--relayout`, agreement and bytes only): `robodata advise -e <the
  default containers>`, each container re-laid by the relayout job's per-episode step
  (robodata.layout.rewrite.rewrite). A second encode: its losses add to the default's.

`calibration_quality`: the chosen camera encoding's PSNR on the advisor's calibration frames.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from robodata.container import EpisodeReader
from robodata.container.plan import LayoutPlan
from robodata.dataset.pattern import ReadPattern
from robodata.ingest.settings import IngestSettings
from robodata.layout.rewrite import rewrite

DEFAULT_VIDEO = IngestSettings().video


def describe(paths: list[Path]) -> dict:
    """The camera encoding and bytes on disk of a set of containers."""
    r = EpisodeReader.open(paths[0])
    try:
        cams = [s for s, sp in r.meta.streams.items() if sp.kind == "video"]
        v = r.layout.group_of(cams[0]).video
        keys = ("codec", "gop", "bframes", "crf", "preset", "entropy", "deblock")
        enc = {k: getattr(v, k) for k in keys} if v else {}
        span = r.layout.group_of(cams[0]).chunk_span_s
    finally:
        r.close()
    return {**enc, "chunk_span_s": span, "bytes": sum(p.stat().st_size for p in paths)}


def _cli() -> list[str]:
    cli = Path(sys.executable).parent / "robodata"
    return [str(cli)] if cli.exists() else [sys.executable, "-m", "robodata.cli"]


def advise_plan(
    patterns: list[str | ReadPattern],
    episodes: list[Path],
    out: Path,
    log: Callable[[str], None],
    source: bool = False,
) -> LayoutPlan:
    """`robodata advise PATTERN...` over `episodes` (containers, or with `source` recordings any
    importer reads: --source), as a user runs it (--quick). A pattern is a preset name (resolved
    at the source's own stream rates) or a ReadPattern (passed as a file); several patterns get one
    layout for all."""
    if not out.exists():
        specs = []
        for p in patterns:
            if isinstance(p, ReadPattern):
                f = out.with_name(f"{out.stem}.{p.name}.pattern.json")
                f.write_text(json.dumps(asdict(p)))
                specs.append(str(f))
            else:
                specs.append(p)
        cmd = [*_cli(), "advise", *specs, "--quick", "--out", str(out)]
        for ep in episodes:
            cmd += ["--source" if source else "-e", str(ep)]
        log(" ".join(["robodata", "advise", *specs, "--quick", "--source" if source else "-e", "..."]))
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode or not out.exists():
            raise RuntimeError(
                f"robodata advise failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
            )
    return LayoutPlan.load(out)


def advise_cli_ok(source: Path, fps: float, out_dir: Path, log: Callable[[str], None], suffix: str = "") -> dict:
    """`robodata advise vla --source SRC` and `robodata advise wam --source SRC` (the documented path,
    presets by name) on a LeRobot dataset recorded at `fps`: both exit 0 and write a plan whose
    pattern is at the data's rates (WAM: every window spans 4 s; VLA: a 50-step action chunk at the
    state rate, the previous and current frame). A plan already at out_dir/plan-{name}{suffix}.json
    (the same command, run for the layouts) is checked, not run again. Returns {"ok": bool, per
    pattern: what was found}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    got: dict = {"fps": fps}
    ok = True
    for name in ("vla", "wam"):
        out = out_dir / f"plan-{name}{suffix}.json"
        cmd = [*_cli(), "advise", name, "--source", str(source), "--quick", "--quiet", "--out", str(out)]
        res = subprocess.run(cmd, capture_output=True, text=True) if not out.exists() else None
        if res is not None and (res.returncode or not out.exists()):
            got[name] = {"exit": res.returncode, "error": (res.stdout + res.stderr)[-600:]}
            ok = False
            log(f"advise {name} --source ({fps:g} Hz) failed: {got[name]['error'][-300:]}")
            continue
        pat = ReadPattern.from_dict(LayoutPlan.load(out).pattern)
        spans = {w.name: round(w.length * w.every / fps, 3) for w in pat.windows}
        if name == "wam":
            good = all(abs(s - 4.0) <= 0.2 for s in spans.values())
        else:
            win = {w.name: w for w in pat.windows}
            good = win["action"].length == 50 and win["cameras"].length == 2 and win["cameras"].offset == -1
        got[name] = {"exit": 0, "window_spans_s": spans, "at_source_rates": good}
        ok = ok and good
    got["ok"] = ok
    return got


def relaid(plan: LayoutPlan, episodes: list[Path], out_dir: Path) -> list[Path]:
    """Every episode re-laid into the plan's layout under out_dir (kept when done)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for src_path in episodes:
        dst = out_dir / src_path.name
        if not dst.exists():
            src = EpisodeReader.open(src_path)
            try:
                rewrite(src, plan.layout_for(src.meta), str(dst))
            finally:
                src.close()
        paths.append(dst)
    return paths


def calibration_quality(plan) -> dict:
    """The chosen camera encoding's PSNR on the advisor's calibration frames (p1, median)."""
    from robodata.container.calibration import Calibration
    from robodata.errors import ConfigError

    v = next((g.video for g in plan.layout.groups if g.video is not None and g.name != "cold_video"), None)
    if v is None or not plan.calibration.get("points"):
        return {}
    try:  # an all-intra layout's point is its crf's (bframes 0) intra figures
        pt = Calibration.from_dict(plan.calibration).point(v.crf, v.bframes if v.gop > 1 else 0, v.entropy, v.deblock)
    except ConfigError:
        return {}
    intra = v.gop == 1
    return {
        "crf": v.crf,
        "entropy": v.entropy,
        "deblock": v.deblock,
        "psnr_db_p1": round(pt.intra_psnr_p1_db if intra else pt.psnr_p1_db, 2),
        "psnr_db_median": round(pt.intra_psnr_median_db if intra else pt.psnr_median_db, 2),
    }
