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

Nothing here knows about record batches; record_batch.py calls these.
"""

from __future__ import annotations

import struct

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


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a batch's records section written by any Kafka client.

    Raises CompressionError (a ValueError) when the bytes are not valid for the codec.
    """
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CompressionError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError and others
        raise CompressionError(f"invalid {CODEC_NAMES[codec]} payload: {exc}") from exc
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")


def _xerial_snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) == XERIAL_MAGIC:
        return _xerial_snappy_decompress(view)
    if bytes(view[:10]) == _SNAPPY_FRAMED_MAGIC:
        return bytes(cramjam.snappy.decompress(view))
    return bytes(cramjam.snappy.decompress_raw(view))


def _xerial_snappy_decompress(view: memoryview) -> bytes:
    """Blocks of ``int32 compressed length + raw snappy`` after a 16-byte header."""
    if len(view) < _XERIAL_HEADER_SIZE:
        raise CompressionError("xerial snappy stream shorter than its header")
    out: list[bytes] = []
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
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + block_len])))
        pos += block_len
    return b"".join(out)
