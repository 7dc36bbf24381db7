"""Parallel execution inside a step: worker processes pulling jobs, bin-packing, decode read-ahead threads."""
