"""Worker process: `python -m robodata.ingest.worker` reads one work bin as JSON on stdin
({"worker", "stage": "convert" | "align", "settings", "jobs"}) and writes one JSON row per
finished episode to stdout.

A fresh interpreter per bin (not fork, not multiprocessing's spawn of __main__): safe inside
any host process (Dagster step, script, test) and its crash loses no finished rows.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.stage_align import align_one
    from robodata.ingest.stage_convert import convert_one

    doc = json.load(sys.stdin)
    settings = IngestSettings.from_dict(doc["settings"])
    stage = doc.get("stage", "convert")
    for job in doc["jobs"]:
        if stage == "align":
            row = {**align_one(job["uri"], job["kind"], settings), "size_bytes": job["size_bytes"]}
        else:
            row = convert_one(job, settings, int(doc["worker"]))
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
