"""The fingerprint of the rows one Spark task wrote: what a re-run is checked against.

Role: an exactly-once task hands the driver, beside its prepared transaction, the
:class:`Fingerprint` of the rows it wrote (computed on the executor by ``row_fingerprint.py``).
The driver records it in the batch's intent, and when a batch ends partly committed it keeps the
committed Spark partitions' fingerprints; the re-run's tasks of those partitions write nothing
and hand back the fingerprint of the rows they were given, which must be equal for the batch to
complete exactly once (``eos/committer.py``).

A fingerprint is the row count and the sum modulo 2**64 of a 64-bit hash of each row, so it does
not depend on the order of the rows, and two fingerprints of disjoint row sets add up
(:meth:`Fingerprint.plus`).

Invariants: a value is immutable and picklable; ``Fingerprint.from_text(f.to_text()) == f``;
this module imports the standard library only (the driver's workers import it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EMPTY_FINGERPRINT", "Fingerprint"]

_MOD = 1 << 64


@dataclass(frozen=True)
class Fingerprint:
    """How many rows, and the order-insensitive 64-bit digest of them."""

    rows: int
    digest: int

    def __post_init__(self) -> None:
        if self.rows < 0 or not 0 <= self.digest < _MOD:
            raise ValueError(
                f"Fingerprint needs rows >= 0 and a digest in 0..2**64-1, got rows={self.rows} "
                f"digest={self.digest}"
            )

    def plus(self, other: Fingerprint) -> Fingerprint:
        """The fingerprint of both row sets together."""
        return Fingerprint(self.rows + other.rows, (self.digest + other.digest) % _MOD)

    def to_text(self) -> str:
        return f"{self.rows}:{self.digest:016x}"

    @classmethod
    def from_text(cls, text: str) -> Fingerprint:
        rows, _, digest = text.partition(":")
        return cls(int(rows), int(digest, 16))

    def __str__(self) -> str:
        return f"{self.rows} row(s), digest {self.digest:016x}"


EMPTY_FINGERPRINT = Fingerprint(0, 0)
