"""Benchmarks: `python -m bench.<name> [--smoke | --quick]`; the last stdout line is one JSON object.

A bench is a bench/<name>.py with an `if __name__ == "__main__":` block and a module-level
`KEYS = (...)` literal naming the result keys it always prints (bench/suite.py); helper modules are
bench/<bench>_<part>.py. `python -m bench --quick` (`make bench-quick`) runs them all and prints one
table; tests/core/test_bench_smoke.py runs each at --smoke.
"""
