"""One integer's zigzag varint, in plain Python: the constants the columnar encoders join.

Role: union branch indexes, Protobuf's message-index list and other per-schema constants are
encoded once, not per row; this module holds that scalar form so the driver-side modules
(``wire_format``) need no numpy. ``columnar.zigzag_varints`` is the column form and must agree
with it byte for byte (the tests compare them).

Invariants: values are signed 64-bit integers; the output is 1 to 10 bytes, low group first.
"""

from __future__ import annotations

__all__ = ["zigzag_varint"]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def zigzag_varint(value: int) -> bytes:
    """``value``'s zigzag varint (0, -1, 1, -2 -> 00, 01, 02, 03)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} is outside the signed 64-bit range of a varint")
    z = ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)
