"""FrameDecoder / encode_frame: Kafka's 4-byte length-prefixed framing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    FrameTooLarge,
    InvalidFrame,
    ProtocolError,
    encode_frame,
)


def _prefix(n: int) -> bytes:
    return struct.pack(">i", n)


def test_default_limit_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 100 * 1024 * 1024
    assert FrameDecoder().max_frame_bytes == DEFAULT_MAX_FRAME_BYTES


def test_encode_frame_golden() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"
    assert encode_frame(bytearray(b"\x01\x02")) == b"\x00\x00\x00\x02\x01\x02"


def test_several_frames_in_one_chunk() -> None:
    decoder = FrameDecoder()
    data = encode_frame(b"one") + encode_frame(b"") + encode_frame(b"three") + b"\x00\x00"
    assert decoder.feed(data) == [b"one", b"", b"three"]
    assert decoder.buffered == 2  # half a length prefix stays
    assert decoder.feed(b"\x00\x01z") == [b"z"]
    assert decoder.buffered == 0


def test_partial_frame_is_kept_until_complete() -> None:
    decoder = FrameDecoder()
    frame = encode_frame(b"hello world")
    assert decoder.feed(frame[:1]) == []
    assert decoder.feed(frame[1:6]) == []
    assert decoder.buffered == 6
    assert decoder.feed(frame[6:]) == [b"hello world"]
    assert decoder.buffered == 0


def test_accepts_bytearray_and_memoryview() -> None:
    decoder = FrameDecoder()
    frame = encode_frame(b"payload")
    assert decoder.feed(bytearray(frame[:5])) == []
    assert decoder.feed(memoryview(frame)[5:]) == [b"payload"]


def test_frames_are_independent_bytes_objects() -> None:
    # The caller keeps frames while the decoder goes on; they must not alias its buffer.
    decoder = FrameDecoder()
    frame = encode_frame(b"abcd")
    decoder.feed(frame[:3])
    (out,) = decoder.feed(frame[3:] + frame[:3])
    decoder.feed(frame[3:])
    assert type(out) is bytes
    assert out == b"abcd"


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=30),
)
def test_random_chunking_reassembles_exactly(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    points = sorted({c % (len(stream) + 1) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    decoder = FrameDecoder()
    out: list[bytes] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    assert out == payloads
    assert decoder.buffered == 0


def test_big_frame_in_many_small_chunks() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    stream = encode_frame(payload)
    decoder = FrameDecoder()
    out: list[bytes] = []
    for i in range(0, len(stream), 4096):
        out.extend(decoder.feed(stream[i : i + 4096]))
        if i + 4096 < len(stream):
            assert decoder.buffered == i + 4096
    assert out == [payload]


def test_too_large_raises_on_the_prefix_alone() -> None:
    decoder = FrameDecoder(max_frame_bytes=100)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(_prefix(101))  # no body byte has arrived
    assert isinstance(info.value, ProtocolError)
    assert info.value.size == 101
    assert info.value.max_frame_bytes == 100


def test_too_large_with_default_limit_and_split_prefix() -> None:
    decoder = FrameDecoder()
    prefix = _prefix(DEFAULT_MAX_FRAME_BYTES + 1)
    assert decoder.feed(prefix[:3]) == []
    with pytest.raises(FrameTooLarge):
        decoder.feed(prefix[3:])


def test_frame_exactly_at_limit_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    assert decoder.feed(encode_frame(b"x" * 10)) == [b"x" * 10]


def test_frames_before_an_oversized_prefix_are_reported() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(encode_frame(b"ok") + _prefix(11))
    assert info.value.complete_frames == (b"ok",)


def test_negative_length_is_invalid() -> None:
    decoder = FrameDecoder()
    with pytest.raises(InvalidFrame):
        decoder.feed(_prefix(-1) + b"junk")
    assert issubclass(InvalidFrame, ProtocolError)


def test_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_bytes=-1)
