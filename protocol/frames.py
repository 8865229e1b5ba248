"""Kafka's framing: every request and response is a 4-byte big-endian length, then that
many bytes.

``FrameDecoder`` is sans-IO: the connection hands it whatever the socket produced and
gets back the complete frames. It never blocks and never reads a socket, so it is the
same code under asyncio, in tests and in replay tools.

A length above ``max_frame_bytes`` (default 100 MiB, the broker's
``socket.request.max.bytes``) raises ``FrameTooLarge`` from the 4-byte prefix alone, before
a byte of the frame is buffered.
"""

from __future__ import annotations

import struct
from typing import Final

from protocol.errors import FrameTooLarge, InvalidFrame, ProtocolError

__all__ = ("DEFAULT_MAX_FRAME_BYTES", "FrameDecoder", "encode_frame")

DEFAULT_MAX_FRAME_BYTES: Final = 104_857_600
"""Kafka's ``socket.request.max.bytes`` default (100 MiB)."""

_LENGTH = struct.Struct(">i")
_unpack_length = _LENGTH.unpack_from


class FrameDecoder:
    """Incremental splitter of a byte stream into frames.

    Partial data is kept in one ``bytearray`` that only grows by appending (amortised
    O(1) per byte), so a 100 MiB frame arriving in 64 KiB reads costs one pass, not a
    quadratic series of re-copies. Each complete frame is copied out exactly once.

    After ``feed`` raises, the stream cannot be resynchronised (there is no way to find
    the next frame boundary), so the caller must close the connection. The exception
    carries ``complete_frames``: the frames that were complete *before* the bad length
    prefix in that same call, should the caller want to answer them first.
    """

    __slots__ = ("_buf", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a complete frame (prefix included)."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Take the next bytes of the stream; return every frame now complete.

        Raises ``FrameTooLarge`` as soon as a length prefix above the limit is seen,
        before any of that frame's body has to arrive, and ``InvalidFrame`` for a
        negative length.
        """
        buf = self._buf
        # When nothing is pending (the common case: whole requests per read) frames are
        # cut straight out of ``data`` and only the tail, if any, is buffered.
        src: bytes | bytearray | memoryview
        if buf:
            buf += data
            src = buf
        else:
            src = data
        total = len(src)
        frames: list[bytes] = []
        pos = 0
        limit = self.max_frame_bytes
        with memoryview(src) as view:
            while total - pos >= 4:
                (size,) = _unpack_length(view, pos)
                if size > limit or size < 0:
                    err: ProtocolError = (
                        FrameTooLarge(size, limit)
                        if size > limit
                        else InvalidFrame(f"negative frame length {size}")
                    )
                    err.complete_frames = tuple(frames)
                    raise err
                end = pos + 4 + size
                if end > total:
                    break
                frames.append(bytes(view[pos + 4 : end]))
                pos = end
            if src is not buf and pos < total:
                buf += view[pos:]
        if src is buf and pos:
            del buf[:pos]
        return frames


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix ``payload`` with its 4-byte big-endian length."""
    return _LENGTH.pack(len(payload)) + bytes(payload)
