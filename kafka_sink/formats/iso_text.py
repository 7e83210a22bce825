"""ISO-8601 text of whole date and timestamp columns, built with numpy.

Role: the JSON encoder's dates and timestamps, quoted: ``"2024-01-02"``,
``"2024-01-02T03:04:05.000006Z"`` (UTC), ``"2024-01-02T03:04:05.000006"`` (no zone, for
timestamp_ntz). Arrow's ``strftime`` and string casts take about a microsecond per value, more
than all other fields of a typical row together; here each row's text is laid out in an
(n x width) byte matrix, digit column by digit column, from the days since the epoch turned into
a civil date (Howard Hinnant's ``civil_from_days``, vectorized) and the time of day.

Invariants: fixed-width output, always six fractional digits (Spark's microseconds; finer units
are floored, as Spark reads them); years outside 0001-9999 (which four digits cannot show) make
``iso_dates`` / ``iso_timestamps`` return None, and the caller falls back to Arrow's formatting.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from kafka_sink.formats.columnar import fixed_width_pieces

__all__ = ["iso_dates", "iso_timestamps"]

_I64 = npt.NDArray[np.int64]
_U8 = npt.NDArray[np.uint8]
_DAY_MICROS = 86_400_000_000


def iso_dates(days: _I64, valid: npt.NDArray[np.bool_]) -> Any:
    """``"YYYY-MM-DD"`` per row of days since 1970-01-01, as a piece column; None if a valid
    row's year is not in 1-9999."""
    civil = _civil(days, valid)
    if civil is None:
        return None
    out = _matrix(len(days), b'"0000-00-00"')
    _date_digits(out, civil)
    return fixed_width_pieces(out, len(days), out.shape[1])


def iso_timestamps(micros: _I64, valid: npt.NDArray[np.bool_], utc: bool) -> Any:
    """``"YYYY-MM-DDTHH:MM:SS.ffffff"`` (``Z`` before the closing quote when ``utc``) per row of
    microseconds since the epoch, as a piece column; None if a valid row's year is not in 1-9999.
    """
    days, of_day = np.divmod(micros, _DAY_MICROS)
    civil = _civil(days, valid)
    if civil is None:
        return None
    out = _matrix(
        len(micros), b'"0000-00-00T00:00:00.000000Z"' if utc else b'"0000-00-00T00:00:00.000000"'
    )
    _date_digits(out, civil)
    seconds, fraction = np.divmod(of_day, 1_000_000)
    hours, rest = np.divmod(seconds, 3600)
    minutes, secs = np.divmod(rest, 60)
    for column, value, width in (
        (12, hours, 2),
        (15, minutes, 2),
        (18, secs, 2),
        (21, fraction, 6),
    ):
        _digits(out, column, value, width)
    return fixed_width_pieces(out, len(micros), out.shape[1])


def _matrix(n: int, template: bytes) -> _U8:
    return np.tile(np.frombuffer(template, dtype=np.uint8), (n, 1))


def _civil(days: _I64, valid: npt.NDArray[np.bool_]) -> tuple[_I64, _I64, _I64] | None:
    """(year, month, day) of each day number (proleptic Gregorian, as Spark's dates)."""
    z = days.astype(np.int64) + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    if valid.any() and ((year < 1) | (year > 9999))[valid].any():
        return None
    return year, month, day


def _date_digits(out: _U8, civil: tuple[_I64, _I64, _I64]) -> None:
    year, month, day = civil
    _digits(out, 1, year, 4)
    _digits(out, 6, month, 2)
    _digits(out, 9, day, 2)


def _digits(out: _U8, column: int, value: _I64, width: int) -> None:
    """Writes ``value`` (0 <= value < 10**width) as ``width`` decimal digits from ``column``."""
    rest = np.clip(value, 0, 10**width - 1)  # null rows hold anything; they are not shown
    for k in range(width - 1, -1, -1):
        rest, digit = np.divmod(rest, 10)
        out[:, column + k] = digit + 48
