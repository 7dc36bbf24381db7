"""What a Zarr replay buffer's importer reads, checked against what the store declares, before
anything is read: every chunk of the episode's range is present (zarr returns the fill value for a
missing chunk, silently: a deleted image chunk would convert as black frames, a state chunk as
zeros), and every file read stays inside the store (a chunk, an array's folder or a metadata file
that is a link out of the store is refused, naming the link). The chunks' bytes are the input the
episode's work is bounded by (robodata.ingest.importers.bounds)."""

from __future__ import annotations

import os
import stat
from itertools import product
from pathlib import Path

from robodata.ingest.raw import RawEpisodeError
from robodata.names import within

META = (".zgroup", ".zattrs", ".zarray", ".zmetadata", "zarr.json")


def _inside(root: Path, path: Path) -> None:
    within(root, path, field="link in the Zarr store", source=path)


def confined_store(store: str, folders: tuple[str, ...] = ("", "data", "meta")) -> Path:
    """The store's root resolved; its group folders and their metadata files must resolve inside it."""
    root = Path(store).resolve()
    for rel in folders:
        d = root / rel if rel else root
        if os.path.lexists(d):
            _inside(root, d)
        for name in META:
            if os.path.lexists(d / name):
                _inside(root, d / name)
    return root


def chunk_bytes(arr, root: Path, lo: int, hi: int, where: str) -> int:
    """Bytes of the stored chunks that hold steps [lo, hi) of `arr` (every chunk along its other
    axes). RawEpisodeError naming the array and chunk for a missing one; UnsafeNameError for an
    array folder, chunk or chunk folder that resolves outside the store."""
    name = arr.store_path.path
    folder = root / name
    confined_store(str(root), (name,))
    if hi <= lo:
        return 0
    meta = arr.metadata
    c0 = int(meta.chunk_grid.chunk_shape[0])
    grid = arr.cdata_shape
    checked: set[Path] = set()
    total = 0
    for coords in product(range(lo // c0, (hi - 1) // c0 + 1), *(range(n) for n in grid[1:])):
        key = meta.encode_chunk_key(coords)
        path = folder / key
        if path.parent not in checked:
            if os.path.lexists(path.parent):
                _inside(root, path.parent)
            checked.add(path.parent)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            first = coords[0] * c0
            raise RawEpisodeError(
                f"{where}: {name} chunk {key} is missing (steps {first}..{min(first + c0, arr.shape[0]) - 1}); "
                f"zarr would fill them with the fill value {arr.fill_value!r}. A store written with "
                "write_empty_chunks=False leaves out chunks equal to the fill value: rewrite it with "
                "write_empty_chunks=True"
            ) from None
        if stat.S_ISLNK(st.st_mode):
            _inside(root, path)
            st = os.stat(path)
        total += st.st_size
    return total
