"""Run every bench and print one table: `python -m bench [--quick | --smoke] [NAME ...]` (`make bench-quick`).

Each bench runs in its own subprocess (bench.suite.run), one after another; a row shows its wall
seconds, pass/fail (exit 0, last line a JSON object with the bench's declared KEYS) and those keys'
values. Every result line is also appended to .bench/<size>-results.jsonl. Exit status 1 when any fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from bench import suite
from bench.common import BENCH_DIR

CELL = 48  # widest value shown in the table; the JSONL file has everything
LINE = 100  # key figures are packed into lines of about this many characters


def _value(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
    return text if len(text) <= CELL else text[: CELL - 3] + "..."


def _lookup(result: dict[str, Any], key: str) -> Any:
    node: Any = result
    for part in key.split("."):
        node = node[part]
    return node


def figures(out: suite.Outcome) -> list[str]:
    if out.result is None:
        lines = [line for line in (out.stderr or out.stdout).splitlines() if line.strip()]
        return [lines[-1][:120] if lines else f"exit {out.rc}, no output"]
    shown = [k for k in out.bench.keys if k != "peak_rss_mb" and k not in out.missing]
    cells = [f"{k}={_value(_lookup(out.result, k))}" for k in shown]
    cells += [f"MISSING {k}" for k in out.missing]
    return cells or ["(no declared keys)"]


def _pack(cells: list[str]) -> list[str]:
    lines: list[str] = []
    for c in cells:
        if lines and len(lines[-1]) + 2 + len(c) <= LINE:
            lines[-1] += "  " + c
        else:
            lines.append(c)
    return lines


def table(outcomes: list[suite.Outcome]) -> str:
    name_w = max([len("bench")] + [len(o.bench.name) for o in outcomes])
    head = f"{'bench':<{name_w}}  {'wall_s':>7}  {'result':<6}  {'rss_mb':>7}  key figures"
    rows = [head, "-" * len(head)]
    for o in outcomes:
        rss = o.result.get("peak_rss_mb", "") if o.result else ""
        status = "pass" if o.ok else ("TIMEOUT" if o.rc == -1 else "FAIL")
        cells = _pack(figures(o))
        rows.append(f"{o.bench.name:<{name_w}}  {o.wall_s:>7.1f}  {status:<6}  {rss!s:>7}  {cells[0]}")
        pad = " " * (name_w + 2 + 7 + 2 + 6 + 2 + 7 + 2)
        rows += [pad + c for c in cells[1:]]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", dest="size", const="quick", help="(default)")
    size.add_argument("--smoke", action="store_const", dest="size", const="smoke")
    ap.add_argument("--timeout-s", type=float, default=3600, help="per bench")
    ap.add_argument("names", nargs="*", help="benches to run (default: all)")
    args = ap.parse_args(argv)
    size_name = args.size or "quick"
    benches = suite.discover()
    unknown = set(args.names) - {b.name for b in benches}
    if unknown:
        ap.error(f"unknown benches {sorted(unknown)}; known: {[b.name for b in benches]}")
    chosen = [b for b in benches if not args.names or b.name in args.names]
    log = suite.REPO / BENCH_DIR / f"{size_name}-results.jsonl"
    log.parent.mkdir(exist_ok=True)
    outcomes = []
    for b in chosen:
        print(f"[bench] {b.name} --{size_name} ...", file=sys.stderr, flush=True)
        out = suite.run(b, size_name, timeout_s=args.timeout_s)
        outcomes.append(out)
        print(f"[bench] {b.name}: {'pass' if out.ok else 'FAIL'} in {out.wall_s:.1f}s", file=sys.stderr, flush=True)
        if not out.ok:
            print(out.tail(1500), file=sys.stderr, flush=True)
        with log.open("a") as f:
            row = {"bench": b.name, "size": size_name, "at": time.strftime("%Y-%m-%dT%H:%M:%S"), "ok": out.ok}
            f.write(json.dumps({**row, "wall_s": out.wall_s, "result": out.result}, sort_keys=True) + "\n")
    print(table(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
