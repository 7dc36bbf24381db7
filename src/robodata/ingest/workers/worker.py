"""Worker process: `python -m robodata.ingest.workers.worker` reads a header line ({"worker", "stage":
"convert" | "align", "settings"}) and then one job per line on stdin, and writes one JSON row
per finished job to stdout (robodata.ingest.workers.dispatch hands out the jobs).

A fresh interpreter (not fork, not multiprocessing's spawn of __main__): safe inside any host
process (Dagster step, script, test) and its crash loses no finished rows.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.steps.aligned_tracks import align_one
    from robodata.ingest.steps.episodes import convert_one

    head = json.loads(sys.stdin.readline())
    settings = IngestSettings.from_dict(head["settings"])
    stage, worker = head.get("stage", "convert"), int(head["worker"])
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        if stage == "align":
            row = {
                **align_one(job["uri"], job["kind"], settings, job.get("stage_to", "")),
                "size_bytes": job["size_bytes"],
            }
        else:
            row = convert_one(job, settings, worker)
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
