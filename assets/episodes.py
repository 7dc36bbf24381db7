"""Foundation assets: synthetic landing zone -> episode containers (the ingestion issue grows this)."""
from pathlib import Path

import dagster as dg

from robodata.ingest.legacy import RawEpisodeError, import_legacy
from robodata.ingest.synth import SynthConfig, synthesize


class DemoConfig(dg.Config):
    root: str = ".demo"
    episodes: int = 4
    duration_s: float = 10.0


@dg.asset(group_name="ingest", description="Synthetic raw recordings in the legacy JPEG-folder form.")
def synthetic_landing(context: dg.AssetExecutionContext, config: DemoConfig) -> dg.MaterializeResult:
    landing = Path(config.root) / "landing"
    paths = synthesize(SynthConfig(episodes=config.episodes, duration_s=config.duration_s), landing)
    size = sum(f.stat().st_size for p in paths for f in p.rglob("*") if f.is_file())
    return dg.MaterializeResult(metadata={"landing": str(landing.resolve()), "episodes": len(paths), "bytes": size})


@dg.asset(group_name="ingest", deps=[synthetic_landing], description="One container per landed episode.")
def demo_containers(context: dg.AssetExecutionContext, config: DemoConfig) -> dg.MaterializeResult:
    landing = Path(config.root) / "landing"
    out = Path(config.root) / "containers"
    done, failed, total = 0, [], 0
    for d in sorted(p for p in landing.iterdir() if p.is_dir()):
        try:
            res = import_legacy(d, out / f"{d.name}.rdep")
            done += 1
            total += res.bytes_written
        except RawEpisodeError as exc:  # one bad episode never fails the batch
            failed.append(str(exc))
    return dg.MaterializeResult(metadata={"containers": str(out.resolve()), "converted": done, "failed": len(failed),
                                          "bytes": total, "errors": dg.MetadataValue.json(failed[:20])})
