"""What the HDF5 importer reads, checked against what the file declares, before anything is read:
nothing outside the file (external links, datasets with external storage and virtual datasets are
refused by default: each would read another file, wherever it is), and ALOHA's `compress_len`
(the byte length of each padded JPEG row) a whole number within its row for every frame."""

from __future__ import annotations

import numpy as np

from robodata.ingest.raw import RawEpisodeError

EOI = b"\xff\xd9"


def _outside(where: str, name: str, what: str) -> RawEpisodeError:
    return RawEpisodeError(
        f"{where}: {name} is {what}; HDF5 external links, external storage and virtual datasets are "
        "refused (they read files outside the item): copy the data into the file (h5repack)"
    )


def hard_path(f, path: str, where: str) -> None:
    """Every link on `path` (from the file's root) stays in the file: no external link (a soft link
    is followed to its target, which must stay in the file too)."""
    import h5py

    parts = [p for p in path.split("/") if p]
    prefix, hops = "", 0
    while parts:
        here = f"{prefix}/{parts.pop(0)}"
        link = f.get(here, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            raise _outside(where, here, f"an external link to {link.filename}:{link.path}")
        if isinstance(link, h5py.SoftLink):
            hops += 1
            if hops > 32:
                raise RawEpisodeError(f"{where}: {here}: soft links nest more than 32 deep")
            prefix = "" if link.path.startswith("/") else prefix  # relative: to the link's group
            parts = [p for p in link.path.split("/") if p] + parts
            continue
        prefix = here


def confined_group(group, where: str) -> None:
    """No external link anywhere below `group` (its datasets: `dataset_outside`, as they are listed)."""
    import h5py

    def visit(name: str, link) -> RawEpisodeError | None:  # a value stops the visit (h5py cannot raise through it)
        if isinstance(link, h5py.ExternalLink):
            full = f"{group.name.rstrip('/')}/{name}"
            return _outside(where, full, f"an external link to {link.filename}:{link.path}")
        return None

    found = group.visititems_links(visit)
    if found is not None:
        raise found


def dataset_outside(ds, where: str) -> RawEpisodeError | None:
    """The error for a dataset whose data lives in other files (virtual, or external storage)."""
    if ds.is_virtual:
        return _outside(where, ds.name, "a virtual dataset")
    if ds.external:
        return _outside(where, ds.name, f"stored in external files {[e[0] for e in ds.external][:3]}")
    return None


def compress_lens(f, key: str, width: int, n: int, where: str) -> np.ndarray | None:
    """ALOHA's byte lengths for camera `key`'s padded JPEG rows ((N, width) uint8): the camera's row
    of the file's `compress_len` (one row per camera, in `observations/images` order), each a whole
    number in 1..width. None when the file has none for this camera (rows are read as they are)."""
    if "compress_len" not in f:
        return None
    hard_path(f, "compress_len", where)
    cams = list(f["observations/images"]) if "observations/images" in f else []
    name = key.rsplit("/", 1)[-1]
    if name not in cams:
        return None
    table = np.asarray(f["compress_len"][()])
    if table.ndim != 2 or table.shape[0] != len(cams) or table.shape[1] != n:
        raise RawEpisodeError(
            f"{where}: compress_len has shape {table.shape}, expected ({len(cams)}, {n}) "
            "(one row per camera in observations/images, one length per frame)"
        )
    lens = table[cams.index(name)]
    bad = np.flatnonzero(~np.isfinite(lens) | (lens != np.round(lens)) | (lens < 4) | (lens > width))
    if len(bad):
        i = int(bad[0])
        raise RawEpisodeError(
            f"{where}: compress_len[{cams.index(name)}][{i}] = {lens[i]!r} for {key} frame {i}: not a byte length "
            f"within its {width}-byte row"
        )
    return lens.astype(np.int64)


def declared_frame(data: bytes, length: int, where: str) -> bytes:
    """A padded row's first `length` bytes, refused unless a JPEG ends exactly there (the declared
    length is the bytes the image holds, not more, not fewer)."""
    if data[:2] == b"\xff\xd8" and data[-2:] != EOI:
        raise RawEpisodeError(f"{where}: compress_len declares {length} bytes, but the JPEG does not end there")
    return data
