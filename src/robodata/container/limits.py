"""ReaderConfig: how much memory one container may make the reader allocate."""

from __future__ import annotations

from dataclasses import dataclass

from robodata.config import require

MiB = 1 << 20
GiB = 1 << 30
MAX_FRAME_SIDE = 16384  # pixels; the most any supported codec decodes


@dataclass(frozen=True)
class ReaderConfig:
    """Caps on what the declared sizes of one container may cost (every size a file declares
    is also bounded by the file's own size).

    max_footer_bytes: the footer (JSON index) read and parsed at open.
    max_decode_bytes: what one read may decompress from array, event and packet parts (Arrow
        buffers, declared lengths checked before any allocation). Real parts are KBs to MBs;
        a 45 KB part declaring 40M rows is refused here.
    max_frame_bytes: the RGB frames one read decodes and returns (frames x H x W x 3).
    max_expansion, expansion_floor_bytes: what one read may decompress relative to the bytes it
        read: at most max(expansion_floor_bytes, max_expansion x the parts' stored bytes) (and
        never over max_decode_bytes), so a few KB cannot buy GBs under the cap. Real parts
        decompress 1-10x (timestamps, values); a 64x64 all-zero array stream ~1,000x, and reads
        under the floor are never refused for their ratio.
    """

    max_footer_bytes: int = 64 * MiB
    max_decode_bytes: int = 1 * GiB
    max_frame_bytes: int = 4 * GiB
    max_expansion: int = 1024
    expansion_floor_bytes: int = 32 * MiB

    def __post_init__(self) -> None:
        for name in ("max_footer_bytes", "max_decode_bytes", "max_frame_bytes", "expansion_floor_bytes"):
            v = getattr(self, name)
            require(isinstance(v, int) and not isinstance(v, bool), f"ReaderConfig.{name} must be an int, got {v!r}")
            require(v >= 1024, f"ReaderConfig.{name} must be >= 1024 bytes, got {v}")
        v = self.max_expansion
        require(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1,
            f"ReaderConfig.max_expansion must be an int >= 1, got {v!r}",
        )
