"""Benchmarks: `python -m bench.<name> [--quick]`, last stdout line is one JSON object."""
