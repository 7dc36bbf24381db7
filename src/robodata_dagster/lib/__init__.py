"""Helpers shared by the definitions (not definitions themselves: the loader does not scan lib/)."""
