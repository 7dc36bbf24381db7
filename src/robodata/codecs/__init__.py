"""Codec registry. Video codecs map a stable name to PyAV encoder/decoder names and options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from robodata.errors import ConfigError

ENTROPY_CODERS = ("cabac", "cavlc")  # VideoSettings.entropy: H.264's two; "cabac" is every codec's default
DEBLOCKS = (True, False)  # VideoSettings.deblock: the in-loop deblocking filter on (every codec's default) or off


@dataclass(frozen=True)
class VideoCodec:
    """`options`: (gop, crf, preset, bframes, entropy, deblock) -> encoder options. `entropies`: the
    entropy coders it offers, its default first ("cabac" names a codec's own arithmetic coder: HEVC
    has only CABAC, AV1 its multi-symbol coder; H.264 alone also has CAVLC, cheaper to decode).
    `deblocks`: whether its encoder can switch the in-loop filters off (H.264's deblocking; HEVC's
    deblocking and SAO): slices say so and every decoder skips them: cheaper to decode, a little
    blockier."""

    name: str
    encoder: str
    decoder: str
    options: Callable[[int, int, str, int, str, bool], dict[str, str]]
    entropies: tuple[str, ...] = ("cabac",)
    deblocks: tuple[bool, ...] = (True,)


def _x264(
    gop: int, crf: int, preset: str, bframes: int, entropy: str = "cabac", deblock: bool = True
) -> dict[str, str]:
    cabac = ":cabac=0" if entropy == "cavlc" else ""
    cabac += "" if deblock else ":no-deblock=1"
    return {
        "crf": str(crf),
        "preset": preset,
        "x264-params": (
            f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}:b-adapt=0:b-pyramid=none:open-gop=0"
            f":forced-idr=1{cabac}"
        ),
    }


def _x265(
    gop: int, crf: int, preset: str, bframes: int, entropy: str = "cabac", deblock: bool = True
) -> dict[str, str]:
    return {
        "crf": str(crf),
        "preset": preset,
        "x265-params": (
            f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}:b-adapt=0:b-pyramid=0:open-gop=0:log-level=error"
            + ("" if deblock else ":no-deblock=1:no-sao=1")  # both in-loop filters: HEVC's SAO too
        ),
    }


def _svtav1(
    gop: int, crf: int, preset: str, bframes: int, entropy: str = "cabac", deblock: bool = True
) -> dict[str, str]:
    # SVT-AV1 presets are numbers (0 slowest .. 13 fastest); map x264 names onto them.
    speed = {"ultrafast": "12", "superfast": "12", "veryfast": "10", "faster": "9", "fast": "8", "medium": "6"}.get(
        preset, preset
    )
    return {"crf": str(crf), "preset": speed, "svtav1-params": f"keyint={gop}:scd=0:irefresh-type=2"}


_REGISTRY: dict[str, VideoCodec] = {
    "h264": VideoCodec("h264", "libx264", "h264", _x264, ENTROPY_CODERS, DEBLOCKS),
    "hevc": VideoCodec("hevc", "libx265", "hevc", _x265, deblocks=DEBLOCKS),
    "av1": VideoCodec("av1", "libsvtav1", "libdav1d", _svtav1),
}


def video_codec(name: str) -> VideoCodec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown video codec {name!r}; known: {sorted(_REGISTRY)}") from None


def decoder_for(codec: str) -> str:
    """The decoder of a demuxed stream's codec: the registry's, else FFmpeg's own decoder of that
    name (a codec the loader does not decode: MPEG-4 part 2, VP9)."""
    known = _REGISTRY.get(codec)
    return known.decoder if known is not None else codec


def register_video_codec(codec: VideoCodec) -> None:
    _REGISTRY[codec.name] = codec
