"""bench.robustness section "spec": hostile curation specs end in ConfigError or a valid manifest.

Cases: valid specs with fields replaced by arbitrary values (wrong types, nested lists and maps,
NaN and huge numbers, NUL and 400-character strings, non-string keys), mutated filters (`contains`
on string columns, ops on the wrong kinds of column), and hostile spec files (deeply nested YAML,
alias bombs, binary bytes, JSON, exclusion files that are binary, hold nested or NUL ids, or point
outside the spec's folder by `..`, an absolute path or a symlink). A spec that loads is evaluated
over a small irregular catalog and its manifest read back verified. `raw_errors` counts exceptions
outside RobodataError; `escaped_reads` exclusion files read from outside the spec's folder.

    python -c "from bench.robustness_spec import run; print(run('quick'))"
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.common import BENCH_DIR
from bench.robustness_manifest import random_catalog, random_spec, round_trip
from robodata.curate.spec import load_spec, spec_from_dict
from robodata.errors import ConfigError, RobodataError

CASES = {"smoke": 60, "quick": 2000, "full": 20000}
KEYS = ["version", "name", "filters", "mix", "budget", "exclude", "split", "catalog_version", "extra"]
STRINGS = [
    "pass",
    "cameras",
    "site",
    "task",
    "day",
    "==",
    "in",
    "contains",
    "between",
    "2024-01-02",
    "a\x00b",
    "x" * 400,
    "../x",
    "",
]


def hostile_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(10 if depth < 3 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31, 2**70, -(2**70)])
    if kind == 3:
        return rng.choice([0.5, float("nan"), float("inf"), -0.0, 1e300])
    if kind in (4, 5, 6):
        return rng.choice(STRINGS)
    if kind in (7, 8):
        return [hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(STRINGS + [1, 2.5, None]): hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def hostile_doc(rng: random.Random, ids: list[str]) -> dict[str, Any]:
    doc = random_spec(rng, ids)
    for key in rng.sample(KEYS, rng.randint(0, 3)):
        doc[key] = hostile_value(rng)
    if isinstance(doc.get("filters"), list) and doc["filters"] and rng.random() < 0.6:
        f = dict(doc["filters"][0]) if isinstance(doc["filters"][0], dict) else {}
        f[rng.choice(["column", "op", "value"])] = rng.choice([hostile_value(rng), rng.choice(STRINGS)])
        doc["filters"] = [f, *doc["filters"][1:]]
    for section in ("mix", "budget", "split", "exclude"):
        if isinstance(doc.get(section), dict) and rng.random() < 0.2:
            sub = dict(doc[section])
            sub[rng.choice(list(sub) or ["x"])] = hostile_value(rng)
            doc[section] = sub
    return doc


def hostile_file(rng: random.Random, folder: Path, outside: Path) -> Path:
    """A spec file (and maybe an exclusion file) in `folder`; `outside` is a file it must never read."""
    p = folder / "spec.yaml"
    kind = rng.randrange(8)
    if kind == 0:
        depth = rng.choice([40, 1000, 100_000])
        p.write_text("version: 1\nname: x\nfilters: " + "[" * depth + "]" * depth + "\n")
    elif kind == 1:
        lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"{c}: &{c} [{', '.join(['*' + q] * 10)}]" for q, c in zip("abcdefgh", "bcdefghi", strict=True)]
        p.write_text("\n".join(lines) + "\nversion: 1\nname: x\n")
    elif kind == 2:
        p.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))))
    elif kind == 3:
        p.write_text(f"version: 1\nname: {rng.choice(['a', 'x' * 400, 'a/b', '..'])!r}\n")
    else:
        content = rng.choice([b"ep-1\nep-2\n", b"\xff\xfe\x00bin", b"[nested, ids]\n", b"ep\x00x\n", b"# only\n"])
        (folder / "ids.txt").write_bytes(content)
        link = folder / "link.txt"
        if not link.exists():
            link.symlink_to(outside)
        rel = rng.choice(["ids.txt", "ids.txt", "../outside.txt", str(outside), "link.txt", "missing.txt", "."])
        p.write_text(f"version: 1\nname: x\nexclude: {{episode_ids_file: {rel!r}}}\n")
    return p


def run(size: str) -> dict[str, Any]:
    rng = random.Random(7)
    cases = CASES[size]
    raw = valid = escaped = 0
    BENCH_DIR.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="robust-spec-", dir=BENCH_DIR))
    outside = work / "outside.txt"
    outside.write_text("ep-secret\n")
    try:
        for i in range(cases):
            rows = random_catalog(rng)
            folder = work / f"c{i}" / "specs"
            folder.mkdir(parents=True)
            try:
                if i % 5 == 4:
                    path = hostile_file(rng, folder, outside)
                    spec = load_spec(path)
                    excluded = spec.excluded_ids(path.parent)
                    escaped += "ep-secret" in excluded
                    doc = {**dataclasses.asdict(spec), "exclude": {"episode_ids": excluded}}
                else:
                    doc = hostile_doc(rng, rows.column("episode_id").to_pylist())
                    spec_from_dict(doc)
                round_trip(rows, doc, folder / "m")
                valid += 1
            except ConfigError:
                pass
            except RobodataError as exc:  # not a spec error, but still a clear error
                print(f"spec case {i}: {type(exc).__name__}: {exc}")
            except Exception as exc:
                raw += 1
                print(f"spec case {i}: RAW {type(exc).__name__}: {str(exc)[:200]}")
            shutil.rmtree(folder.parent, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"cases": cases, "raw_errors": raw, "valid_specs": valid, "escaped_reads": escaped}
