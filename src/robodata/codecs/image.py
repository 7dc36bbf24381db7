"""Camera images as they travel from an importer to the encoder.

An `Image` is either an RGB uint8 array (H, W, 3) or a decoded `av.VideoFrame` left in the
decoder's own pixel format (a JPEG decodes to yuvj420p, an H.264/AV1 file to yuv420p). Handing
the frame on as it is skips two conversions per frame (YUV -> RGB after decoding, RGB -> YUV
before encoding): together about 1.9 ms of a ~4.6 ms frame at 640x480.
"""

from __future__ import annotations

import io
import re
import threading

import av
import numpy as np
from av.video.codeccontext import VideoCodecContext

from robodata.errors import CodecError

Image = np.ndarray | av.VideoFrame

_tls = threading.local()


class ImageError(CodecError):
    """The bytes are not a decodable image (the message says why). A RobodataError (and a
    ValueError, as before)."""


def image_shape(img: Image) -> tuple[int, ...]:
    """(H, W, 3) for a frame, the array's shape otherwise."""
    if isinstance(img, av.VideoFrame):
        return (img.height, img.width, 3)
    return tuple(img.shape)


def _mjpeg() -> VideoCodecContext:
    """Per-thread libavcodec JPEG decoder; err_detect=explode turns truncation into an error."""
    ctx: VideoCodecContext | None = getattr(_tls, "mjpeg", None)
    if ctx is None:
        ctx = _tls.mjpeg = av.CodecContext.create("mjpeg", "r")
        ctx.options = {"err_detect": "explode"}
    return ctx


def decode_jpeg_bytes(data: bytes) -> Image:
    """JPEG bytes -> a yuvj420p/yuvj422p/... frame from libavcodec (no colour conversion), or,
    for what libavcodec refuses (progressive oddities, CMYK), an RGB array from PIL.
    Raises ImageError for bytes neither can decode (truncated, not a JPEG)."""
    if data[:2] == b"\xff\xd8" and data[-2:] == b"\xff\xd9":
        try:
            frames = _mjpeg().decode(av.Packet(data))
            if frames:
                return frames[0]
        except av.error.FFmpegError:
            pass
    return decode_with_pil(data)


_OBJECT_REPR = re.compile(r" ?<[\w.]+ object at 0x[0-9a-fA-F]+>")


def decode_with_pil(data: bytes) -> np.ndarray:
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data)) as im:
            return np.asarray(im.convert("RGB"))
    except Exception as exc:  # PIL raises many types for broken files
        why = _OBJECT_REPR.sub("", str(exc))  # "cannot identify image file <_io.BytesIO object at 0x...>"
        raise ImageError(f"not a decodable image ({why})") from None
