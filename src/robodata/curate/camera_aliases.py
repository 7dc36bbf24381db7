"""A curation spec's camera alias map: roles for the cameras the catalog left without one.

A catalog row's `camera_roles` come from the source (its declaration, a key map, or a camera's own
name: robodata.container.roles); a camera named `image_0` or `cam_high` declares nothing there.
A spec's `cameras: {front: [cam_high, image, image_0, top]}` names them: a camera whose catalog
role is "" and whose name is listed under a role takes that role. The spec's filters see the
resolved roles (`{column: camera_roles, op: contains, value: front}` keeps the rows having a front
camera) and the manifest's `camera_roles` carry them, so a read pattern asks for `front` by role
(robodata.dataset.mixpattern). A camera the catalog gave a role keeps it.

The resolution is one Polars expression over the two list columns (no per-row Python), laid over
the catalog scan before the spec's predicate.
"""

from __future__ import annotations

import polars as pl

from robodata.config import require

RESERVED = ("state", "action")  # the array roles: a camera role may not take their names
MAX_NAMES = 1000


def check_aliases(cameras: dict[str, list[str]]) -> None:
    """ConfigError unless `cameras` maps role names to lists of camera names, each name under one role."""
    seen: dict[str, str] = {}
    for role, names in cameras.items():
        where = f"cameras.{role}"
        ok = 0 < len(role) <= 64 and role.isprintable() and role not in RESERVED
        require(ok, f"{where}: a camera role is a printable name of 1..64 characters, not state/action")
        require(len(names) > 0, f"{where}: list the camera names that have this role")
        for name in names:
            require(0 < len(name) <= 1024 and name.isprintable(), f"{where}: {name[:60]!r} is not a camera name")
            other = seen.setdefault(name, role)
            require(other == role, f"{where}: camera {name!r} is listed under {other!r} too; one role a name")
    require(len(seen) <= MAX_NAMES, f"cameras: {len(seen)} camera names, at most {MAX_NAMES}")


def resolved_roles(cameras: dict[str, list[str]]) -> pl.Expr:
    """`camera_roles` with each camera the catalog left without a role given the role its name is
    listed under (see the module docstring). A row whose roles do not pair with its cameras (an
    older row: null or another length) takes the alias roles alone."""
    to_role = {name: role for role, names in cameras.items() for name in names}
    names, roles = pl.col("cameras"), pl.col("camera_roles")
    n = names.list.len()
    paired = pl.when(roles.list.len() == n).then(roles).otherwise(names.list.eval(pl.lit("", pl.String)))
    by_alias = names.list.eval(pl.element().replace_strict(to_role, default="", return_dtype=pl.String))
    unknown = paired.list.eval((pl.element() == "").cast(pl.Int64))
    # [catalog roles..., alias roles...]: take the alias role where the catalog's is ""
    return pl.concat_list([paired, by_alias]).list.gather(pl.int_ranges(0, n) + unknown * n)


def with_aliases(cameras: dict[str, list[str]], lf: pl.LazyFrame) -> pl.LazyFrame:
    """The catalog rows `lf` with their `camera_roles` resolved by the spec's alias map (as is without one)."""
    return lf.with_columns(camera_roles=resolved_roles(cameras)) if cameras else lf
