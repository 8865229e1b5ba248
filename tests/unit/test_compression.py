"""Compression codecs must read what other Kafka clients' implementations write."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from aiokafka import codec as aiokafka_codec
from kafka import codec as kafka_python_codec

from protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    CompressionError,
    UnsupportedCodecError,
    codec_name,
    compress,
    decompress,
    decompress_bounded,
)

DATA = b"".join(b"record-%06d|" % i for i in range(20000))  # ~260 KB: several blocks


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_round_trip(codec: int) -> None:
    packed = compress(codec, DATA)
    if codec != NONE:
        assert len(packed) < len(DATA)
    assert decompress(codec, packed) == DATA


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_accepts_bytearray_and_memoryview(codec: int) -> None:
    packed = compress(codec, bytearray(DATA))
    assert compress(codec, memoryview(DATA)) == packed
    assert decompress(codec, memoryview(bytearray(packed))) == DATA


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_empty_payload_round_trip(codec: int) -> None:
    assert decompress(codec, compress(codec, b"")) == b""


def test_gzip_written_by_stdlib_and_kafka_python() -> None:
    assert decompress(GZIP, gzip.compress(DATA)) == DATA
    assert decompress(GZIP, kafka_python_codec.gzip_encode(DATA)) == DATA


def test_gzip_multiple_members() -> None:
    assert decompress(GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


def test_our_gzip_read_by_stdlib_and_kafka_python() -> None:
    packed = compress(GZIP, DATA)
    assert gzip.decompress(packed) == DATA
    assert kafka_python_codec.gzip_decode(packed) == DATA


def test_snappy_xerial_written_by_aiokafka() -> None:
    """Java's producer (snappy-java) and aiokafka write xerial-framed snappy."""
    packed = aiokafka_codec.snappy_encode(DATA, xerial_compatible=True)
    assert packed.startswith(XERIAL_MAGIC)
    assert decompress(SNAPPY, packed) == DATA


def test_snappy_raw_block_written_by_aiokafka() -> None:
    """librdkafka and some clients write one raw snappy block."""
    packed = bytes(aiokafka_codec.snappy_encode(DATA, xerial_compatible=False))
    assert not packed.startswith(XERIAL_MAGIC)
    assert decompress(SNAPPY, packed) == DATA


def test_our_snappy_is_xerial_and_readable_by_aiokafka() -> None:
    packed = compress(SNAPPY, DATA)
    assert packed[:8] == XERIAL_MAGIC
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    assert aiokafka_codec.snappy_decode(packed) == DATA


def test_snappy_xerial_with_truncated_block_is_an_error() -> None:
    packed = compress(SNAPPY, DATA)
    with pytest.raises(CompressionError):
        decompress(SNAPPY, packed[:-10])


def test_lz4_frame_written_by_aiokafka_and_with_linked_blocks() -> None:
    assert decompress(LZ4, aiokafka_codec.lz4_encode(DATA)) == DATA
    # a frame with linked blocks and a content checksum (other writers' defaults)
    assert decompress(LZ4, bytes(cramjam.lz4.compress(DATA))) == DATA


def test_our_lz4_uses_independent_blocks() -> None:
    packed = compress(LZ4, DATA)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg = packed[4]
    assert flg & 0x20, "block independence flag must be set for Kafka's Java reader"
    assert aiokafka_codec.lz4_decode(packed) == DATA


def test_zstd_streamed_frame_without_content_size() -> None:
    """zstd-jni's ZstdOutputStream and librdkafka stream frames with no content size."""
    compressor = cramjam.zstd.Compressor(level=3)
    compressor.compress(DATA)
    packed = bytes(compressor.finish())
    assert decompress(ZSTD, packed) == DATA
    assert decompress(ZSTD, aiokafka_codec.zstd_encode(DATA)) == DATA
    assert aiokafka_codec.zstd_decode(compress(ZSTD, DATA)) == DATA


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_raises_compression_error(codec: int) -> None:
    with pytest.raises(CompressionError):
        decompress(
            codec,
            b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\xff" * 40
            if codec == SNAPPY
            else b"this is not compressed data at all",
        )


def test_unknown_codec() -> None:
    with pytest.raises(UnsupportedCodecError):
        compress(5, b"x")
    with pytest.raises(UnsupportedCodecError):
        decompress(7, b"x")
    with pytest.raises(UnsupportedCodecError):
        codec_name(6)
    assert codec_name(ZSTD) == "zstd"


def test_decompress_bounded_of_uncompressed_is_a_view_without_copy() -> None:
    data = bytearray(b"records")
    view = decompress_bounded(NONE, data, 0)  # nothing is inflated: no bound applies
    assert view.readonly and view.obj is data


def test_decompress_bounded_refuses_bad_arguments() -> None:
    with pytest.raises(UnsupportedCodecError):
        decompress_bounded(6, b"x", 10)
    with pytest.raises(ValueError):
        decompress_bounded(GZIP, compress(GZIP, b"x"), -1)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_decompress_bounded_result_is_read_only(codec: int) -> None:
    view = decompress_bounded(codec, compress(codec, DATA), len(DATA))
    assert view.readonly and bytes(view) == DATA
