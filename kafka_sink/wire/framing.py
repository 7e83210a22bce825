"""Kafka frames: an int32 size followed by that many payload bytes.

Role: turn a request payload into a frame, and cut an incoming byte stream into response payloads
whatever the read boundaries (partial frames, several frames in one read).

Invariants:
- :class:`FrameDecoder` rejects a size prefix above ``max_frame_size`` (or negative) with a
  :class:`~kafka_sink.errors.ProtocolError` as soon as the 4 size bytes arrive, before buffering
  or allocating anything for that frame. After that error the decoder is unusable (the stream
  position is lost), so the connection must be closed.
- Bytes are copied at most once into the internal buffer and once into each returned payload.
"""

from __future__ import annotations

import struct

from kafka_sink.errors import ProtocolError

__all__ = ["FrameDecoder", "frame"]

_SIZE = struct.Struct(">i")


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its int32 size prefix."""
    return b"".join((_SIZE.pack(len(payload)), payload))


class FrameDecoder:
    """Incremental frame splitter: ``feed(bytes) -> [complete payloads]``."""

    __slots__ = ("_buf", "_failed", "_need", "max_frame_size")

    def __init__(self, max_frame_size: int) -> None:
        if max_frame_size <= 0:
            raise ValueError("max_frame_size must be positive")
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._need = -1  # payload size of the frame being read; -1 while reading its size
        self._failed = False

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._failed:
            raise ProtocolError("frame decoder is unusable after a framing error")
        if data:
            self._buf += data
        frames: list[bytes] = []
        buf = self._buf
        pos = 0
        end = len(buf)
        while True:
            if self._need < 0:
                if end - pos < 4:
                    break
                size = _SIZE.unpack_from(buf, pos)[0]
                if size < 0 or size > self.max_frame_size:
                    self._failed = True
                    self._buf = bytearray()
                    raise ProtocolError(
                        f"frame size {size} is outside 0..{self.max_frame_size} "
                        "(corrupt stream, or not a Kafka listener)"
                    )
                pos += 4
                self._need = size
            if end - pos < self._need:
                break
            # Through a memoryview so each payload is copied once (a bytearray slice would copy
            # twice); the view is released before the buffer is resized below.
            with memoryview(buf) as view:
                frames.append(bytes(view[pos : pos + self._need]))
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames
