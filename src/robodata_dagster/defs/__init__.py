"""Definitions, one folder per domain; loaded by `dg.load_from_defs_folder` (see definitions.py)."""
