"""`robodata` command line. Each domain registers its commands in its own module.

To add commands, write `robodata/<domain>/commands.py` exposing `register(app)` and
add the module name to COMMAND_MODULES (one line per domain).
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="robodata: data platform for robot learning")

COMMAND_MODULES = [
    "robodata.cache.commands",
    "robodata.catalog.commands",
    "robodata.container.commands",
    "robodata.ingest.commands",
    "robodata.health.commands",
    "robodata.cluster.commands",  # `health repair`, after health
    "robodata.train.commands",
    "robodata.curate.commands",
    "robodata.export.commands",
    "robodata.layout.commands",
    "robodata.upload.commands",
    "robodata.viz.commands",
]

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
