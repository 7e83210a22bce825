"""The bytes a ProduceRequest adds around its record batches, counted against max.request.size.

Role: ``max.request.size`` bounds the whole request as the broker reads it. The broker's
``socket.request.max.bytes`` counts everything after the 4-byte size prefix: the request
header (with the client id), the transactional id, and for each topic and partition its entry
around the record batch. Java counts only the batches, so its requests may exceed the setting
by this framing; where the broker's limit is hard (Azure Event Hubs closes the connection on a
request above 1,046,528 bytes, which the ``event-hubs`` preset allows as ``max.request.size``)
that difference loses the connection. So the producer counts the framing too:

- the record-size check: a record's one-record batch plus :func:`single_partition_framing`
  must fit (``producer.py``, ``bulk.py``);
- the accumulator's drain: :func:`request_framing` once per request, :func:`topic_framing` once
  per topic in it, :data:`PARTITION_FRAMING` per batch, plus the batches' sizes.

Invariant: each figure is an upper bound over the Produce versions this client sends (3-12,
flexible from 9: compact strings and arrays with unsigned-varint lengths, tagged-field bytes),
so a request whose counted size is within ``max.request.size`` encodes to at most that many
bytes after its size prefix.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["PARTITION_FRAMING", "request_framing", "single_partition_framing", "topic_framing"]

# A length-prefixed array: int32 (versions 3-8) or an unsigned varint (9+), at most 5 bytes.
_ARRAY_LENGTH = 5
#: Per partition: its index (int32), the records' length (int32, or an unsigned varint of at
#: most 5 bytes), its tagged fields (1 byte in flexible versions).
PARTITION_FRAMING = 4 + 5 + 1


def _uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def _string_size(text: str | None) -> int:
    """An upper bound of a (nullable) string's encoding: int16 length or compact varint."""
    if text is None:
        return 2  # int16 -1; compact null is the single varint 0
    n = len(text.encode("utf-8"))
    return max(2, _uvarint_size(n + 1)) + n


def request_framing(client_id: str | None, transactional_id: str | None) -> int:
    """What every ProduceRequest of this producer carries besides its topics.

    Header (v1 or v2): api key 2, api version 2, correlation id 4, client id (always an int16
    length), tagged fields 1. Body: transactional id, acks 2, timeout 4, the topic array's
    length, tagged fields 1.
    """
    header = 2 + 2 + 4 + _string_size(client_id) + 1
    body = _string_size(transactional_id) + 2 + 4 + _ARRAY_LENGTH + 1
    return header + body


@lru_cache(maxsize=1024)
def topic_framing(topic: str) -> int:
    """One topic's entry: its name, its partition array's length, its tagged fields. (Cached:
    the general ``send()`` path and each drain ask it for the same few topics again and again,
    and it encodes the name.)"""
    return _string_size(topic) + _ARRAY_LENGTH + 1


def single_partition_framing(
    client_id: str | None, transactional_id: str | None, topic: str
) -> int:
    """The framing of a request carrying one batch of ``topic``: what a lone record must fit."""
    return request_framing(client_id, transactional_id) + topic_framing(topic) + PARTITION_FRAMING
