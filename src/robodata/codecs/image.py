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

from robodata.codecs.jpeg_frame import JpegStructureError, frame_of, is_jpeg, trimmed
from robodata.errors import CodecError

Image = np.ndarray | av.VideoFrame

_tls = threading.local()
MAX_SIDE = 16384  # pixels a side: a frame header declaring more is refused before decoding


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
    for codings libavcodec does not read (arithmetic, lossless, CMYK), an RGB array from PIL.
    Raises ImageError for bytes that cannot be decoded whole: not an image, a JPEG whose segments
    or end marker are missing (robodata.codecs.jpeg_frame), one declaring more than MAX_SIDE a
    side, and one libavcodec refuses (a cut scan, even with its end marker put back): PIL would
    conceal the missing data with grey blocks, so no second decoder is asked."""
    if not is_jpeg(data):
        return decode_with_pil(data)  # PNG and the like
    data = trimmed(data)
    try:
        frame = frame_of(data)
    except JpegStructureError as exc:
        raise ImageError(f"broken JPEG: {exc}") from None
    if frame.height > MAX_SIDE or frame.width > MAX_SIDE:
        raise ImageError(f"JPEG frame header declares {frame.width}x{frame.height}, over {MAX_SIDE} a side")
    try:
        frames = _mjpeg().decode(av.Packet(data))
    except av.error.FFmpegError as exc:
        if frame.native:
            raise ImageError(
                f"corrupt JPEG ({frame.width}x{frame.height}): its scan does not decode whole ({exc})"
            ) from None
        frames = []
    if frames:
        return frames[0]
    if frame.native:
        raise ImageError(f"corrupt JPEG ({frame.width}x{frame.height}): the decoder gave no frame")
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
