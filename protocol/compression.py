"""Record-batch payload compression: gzip, snappy, lz4, zstd via cramjam.

The codec ids are the ones in bits 0-2 of a record batch's attributes. What each
client actually writes differs, and the broker must read all of it:

* gzip: a gzip stream (RFC 1952). Java's GZIPOutputStream, librdkafka and the Python
  clients all write one member; we accept several (cramjam concatenates members).
* snappy: Kafka's Java client writes snappy-java's *xerial* framing (a 16-byte header
  ``\\x82SNAPPY\\x00`` + version + compat, then blocks of ``int32 length + raw snappy``).
  librdkafka and some Python clients may write a single raw snappy block. We detect the
  xerial magic and otherwise treat the payload as raw; we also accept the official
  snappy framing format, which no Kafka client writes but costs one comparison. We write
  xerial, since that is what every Kafka reader (Java's SnappyInputStream included)
  understands.
* lz4: the LZ4 *frame* format (KIP-57). We write independent blocks and no content
  checksum, as Java's KafkaLZ4BlockOutputStream does, since older Java readers refuse
  linked blocks.
* zstd: a zstd frame; Java (zstd-jni's ZstdOutputStream) and librdkafka write frames
  without a content size, which cramjam's streaming decoder handles.

Bounded decompression. A record batch is small on the wire but may claim any size once
inflated: 32 KiB of zstd can expand to 1 GiB. So nothing here decompresses without a
bound: ``decompress_bounded(codec, data, max_bytes)`` never holds more than
``max_bytes`` of output, and refuses a payload that would inflate beyond it
(``DecompressedSizeExceeded``) after producing at most ``max_bytes`` -- not after
inflating it all. How, per codec:

* gzip, lz4, zstd, framed snappy: cramjam's ``decompress_into`` streams the decoder
  into a caller-sized buffer and stops with an error ("failed to write whole buffer")
  the moment the buffer is full. The buffer is a ``bytearray`` when small (a first
  guess from the compressed size, up to 256 KiB), else an anonymous ``mmap`` of
  ``max_bytes``: its pages are only committed as the decoder writes them, so reserving
  64 MiB for a 100 KiB result costs a few microseconds, not a 64 MiB memset (which
  ``bytearray(n)`` would do).
* raw snappy (one block, what librdkafka writes) and xerial snappy (Java's producer):
  each raw block starts with its uncompressed length; the lengths are summed and
  checked against the bound before anything is allocated, then each block is
  decompressed into its exact slice.

``DEFAULT_MAX_DECOMPRESSED_BYTES`` (64 MiB) is the bound when the caller gives none:
64 times Kafka's default ``message.max.bytes`` (1 MiB), above the ratios real producers
reach on record data (2-10x typically, a few tens for very repetitive JSON) yet small
enough that validating one batch never holds more than 64 MiB. Kafka itself has no such
bound (it streams the records of a batch), so any value is our choice; the broker can
pass its own.

Nothing here knows about record batches; record_batch.py calls these.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from typing import Final

import cramjam

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {
    NONE: "none",
    GZIP: "gzip",
    SNAPPY: "snappy",
    LZ4: "lz4",
    ZSTD: "zstd",
}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible 1
_XERIAL_HEADER_SIZE = 16
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size
_SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"
_INT32 = struct.Struct(">i")

# Compression levels as Kafka's defaults (KIP-390): zlib's default 6 for gzip, 9 for
# lz4 and 3 for zstd.
_GZIP_LEVEL = 6
_ZSTD_LEVEL = 3
_LZ4_LEVEL = 9


class CompressionError(ValueError):
    """The payload could not be (de)compressed with the codec the batch names."""


class UnsupportedCodecError(CompressionError):
    """Attributes name a codec id outside 0-4."""


class DecompressedSizeExceeded(CompressionError):
    """The payload inflates to more than the bound it was decompressed with.

    Raised after producing at most ``max_bytes`` bytes of output, never more.
    """

    def __init__(self, codec: int, max_bytes: int) -> None:
        super().__init__(
            f"{CODEC_NAMES.get(codec, codec)} payload decompresses to more than {max_bytes} bytes"
        )
        self.codec = codec
        self.max_bytes = max_bytes


DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 64 * 1024 * 1024
"""The bound of ``decompress``/``decompress_bounded`` when none is given (see above)."""

# Outputs up to this size live in a bytearray (zero-filled at once, cheap when small);
# larger ones in an anonymous mmap, whose pages are committed only as they are written.
_SMALL_OUTPUT: Final = 256 * 1024
# The first guess of a streamed codec's output size, before falling back to the bound.
_FIRST_GUESS_RATIO: Final = 4
_FIRST_GUESS_MIN: Final = 64 * 1024
# What cramjam's decompress_into says when the output buffer is full (Rust's
# io::ErrorKind::WriteZero). A test pins it: if cramjam changes the text, a payload
# larger than the first guess would read as corrupt, and that test fails.
_OUTPUT_FULL: Final = "failed to write whole buffer"

_Buffer = bytes | bytearray | memoryview
_DecompressInto = Callable[[_Buffer, bytearray | mmap.mmap | memoryview], int]


def codec_name(codec: int) -> str:
    """Kafka's name for a codec id (``compression.type`` values)."""
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise UnsupportedCodecError(f"unknown compression codec id {codec}") from None


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress a batch's records section the way a Kafka producer would."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=_GZIP_LEVEL))
    if codec == SNAPPY:
        return _xerial_snappy_compress(data)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(
            level=_LZ4_LEVEL, content_checksum=False, block_linked=False
        )
        compressor.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")


def decompress(
    codec: int,
    data: bytes | bytearray | memoryview,
    max_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> bytes:
    """Decompress a batch's records section written by any Kafka client, as ``bytes``.

    A copy of ``decompress_bounded``'s result. Raises CompressionError (a ValueError)
    when the bytes are not valid for the codec, DecompressedSizeExceeded (a
    CompressionError) when they inflate beyond ``max_bytes``.
    """
    if codec == NONE:
        return bytes(data)
    return bytes(decompress_bounded(codec, data, max_bytes))


def decompress_bounded(
    codec: int, data: bytes | bytearray | memoryview, max_bytes: int
) -> memoryview:
    """Decompress into a read-only view holding at most ``max_bytes`` bytes.

    Never allocates or produces more than ``max_bytes`` of output (see the module
    docstring); a payload that inflates beyond it raises DecompressedSizeExceeded once
    ``max_bytes`` have been produced. Invalid bytes raise CompressionError, an unknown
    codec UnsupportedCodecError. ``NONE`` returns a view of ``data`` itself (no copy, no
    bound: nothing is inflated). The view may be backed by an mmap, unmapped when the
    last reference to the view goes.
    """
    if codec == NONE:
        return memoryview(data).toreadonly()
    if codec not in CODEC_NAMES:
        raise UnsupportedCodecError(f"unknown compression codec id {codec}")
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
    try:
        if codec == GZIP:
            return _stream_into(cramjam.gzip.decompress_into, codec, data, max_bytes)
        if codec == SNAPPY:
            return _snappy_decompress(data, max_bytes)
        if codec == LZ4:
            return _stream_into(cramjam.lz4.decompress_into, codec, data, max_bytes)
        return _stream_into(cramjam.zstd.decompress_into, codec, data, max_bytes)
    except CompressionError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError and others
        raise CompressionError(f"invalid {CODEC_NAMES[codec]} payload: {exc}") from exc


def _output_buffer(size: int) -> bytearray | mmap.mmap:
    if size <= _SMALL_OUTPUT:
        return bytearray(size)
    return mmap.mmap(-1, size)


def _stream_into(
    decompress_into: _DecompressInto,
    codec: int,
    data: bytes | bytearray | memoryview,
    max_bytes: int,
) -> memoryview:
    """A streamed codec: a small first try, then one try with the whole bound."""
    guess = min(max_bytes, max(_FIRST_GUESS_MIN, len(data) * _FIRST_GUESS_RATIO))
    if guess <= _SMALL_OUTPUT:
        small = bytearray(guess)
        try:
            size = decompress_into(data, small)
        except Exception as exc:
            if _OUTPUT_FULL not in str(exc):
                raise
            if guess >= max_bytes:
                raise DecompressedSizeExceeded(codec, max_bytes) from None
        else:
            return memoryview(small)[:size].toreadonly()
        del small
    out = _output_buffer(max_bytes)
    try:
        size = decompress_into(data, out)
    except Exception as exc:
        if _OUTPUT_FULL in str(exc):
            raise DecompressedSizeExceeded(codec, max_bytes) from None
        raise
    return memoryview(out)[:size].toreadonly()


def _xerial_snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview, max_bytes: int) -> memoryview:
    view = memoryview(data)
    if bytes(view[:8]) == XERIAL_MAGIC:
        return _xerial_snappy_decompress(view, max_bytes)
    if bytes(view[:10]) == _SNAPPY_FRAMED_MAGIC:
        return _stream_into(cramjam.snappy.decompress_into, SNAPPY, view, max_bytes)
    return _raw_snappy_blocks(view, [(0, len(view))], max_bytes)


def _xerial_snappy_decompress(view: memoryview, max_bytes: int) -> memoryview:
    """Blocks of ``int32 compressed length + raw snappy`` after a 16-byte header."""
    if len(view) < _XERIAL_HEADER_SIZE:
        raise CompressionError("xerial snappy stream shorter than its header")
    blocks: list[tuple[int, int]] = []
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    while pos < end:
        if pos + 4 > end:
            raise CompressionError("xerial snappy block length runs past the payload")
        (block_len,) = _INT32.unpack_from(view, pos)
        pos += 4
        if block_len < 0 or pos + block_len > end:
            raise CompressionError(
                f"xerial snappy block of {block_len} bytes runs past the payload"
            )
        blocks.append((pos, pos + block_len))
        pos += block_len
    return _raw_snappy_blocks(view, blocks, max_bytes)


def _raw_snappy_blocks(
    view: memoryview, blocks: list[tuple[int, int]], max_bytes: int
) -> memoryview:
    """Raw snappy blocks, each led by its uncompressed length: the lengths are checked
    against the bound before anything is allocated, then each block fills its slice."""
    sizes: list[int] = []
    total = 0
    for start, stop in blocks:
        size = int(cramjam.snappy.decompress_raw_len(view[start:stop]))
        total += size
        if total > max_bytes:
            raise DecompressedSizeExceeded(SNAPPY, max_bytes)
        sizes.append(size)
    out = _output_buffer(total)
    target = memoryview(out)
    at = 0
    for (start, stop), size in zip(blocks, sizes, strict=True):
        written = cramjam.snappy.decompress_raw_into(view[start:stop], target[at : at + size])
        if written != size:
            raise CompressionError(
                f"snappy block declares {size} bytes but decompresses to {written}"
            )
        at += size
    return target.toreadonly()
