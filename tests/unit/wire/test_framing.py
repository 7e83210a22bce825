"""Frames: size prefixes, partial reads, several frames per read, oversized frames."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_sink.errors import ProtocolError
from kafka_sink.wire.framing import FrameDecoder, frame


def test_frame_adds_int32_size() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"


def test_byte_by_byte_feed_yields_each_frame_once() -> None:
    stream = frame(b"hello") + frame(b"") + frame(b"world!")
    decoder = FrameDecoder(max_frame_size=100)
    out: list[bytes] = []
    for i in range(len(stream)):
        out.extend(decoder.feed(stream[i : i + 1]))
    assert out == [b"hello", b"", b"world!"]
    assert decoder.buffered_bytes == 0


def test_several_frames_in_one_read_plus_a_partial_one() -> None:
    decoder = FrameDecoder(max_frame_size=100)
    stream = frame(b"a") + frame(b"bb") + frame(b"ccc")
    assert decoder.feed(memoryview(stream[:-2])) == [b"a", b"bb"]
    assert decoder.buffered_bytes == 1  # the size of "ccc" is consumed, one byte waits
    assert decoder.feed(stream[-2:]) == [b"ccc"]
    assert decoder.feed(b"") == []


@given(
    st.lists(st.binary(max_size=50), max_size=8),
    st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=20),
)
def test_any_split_of_the_stream_gives_the_same_frames(
    payloads: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder(max_frame_size=50)
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        out.extend(decoder.feed(stream[pos : pos + step]))
        pos += step
        i += 1
    assert out == payloads


def test_oversized_frame_is_rejected_from_its_size_alone() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    # Only the size prefix has arrived: the decoder must fail now, not wait for 2 GiB.
    with pytest.raises(ProtocolError, match=r"frame size 2147483647 is outside 0\.\.1024"):
        decoder.feed(b"\x7f\xff\xff\xff")
    assert decoder.buffered_bytes == 0
    with pytest.raises(ProtocolError, match="unusable"):
        decoder.feed(b"\x00")


def test_negative_size_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="frame size -1"):
        FrameDecoder(max_frame_size=10).feed(b"\xff\xff\xff\xff")


def test_frames_up_to_the_limit_are_accepted() -> None:
    decoder = FrameDecoder(max_frame_size=3)
    assert decoder.feed(frame(b"abc")) == [b"abc"]
    with pytest.raises(ProtocolError):
        decoder.feed(frame(b"abcd"))


def test_non_kafka_bytes_fail_clearly() -> None:
    # An HTTP or TLS listener answers with text; its first 4 bytes read as a huge size.
    with pytest.raises(ProtocolError, match="not a Kafka listener"):
        FrameDecoder(max_frame_size=100 * 1024 * 1024).feed(b"HTTP/1.1 400 Bad Request\r\n")


def test_max_frame_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        FrameDecoder(max_frame_size=0)
