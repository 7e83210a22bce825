"""Credentials in URLs (``https://USER:PASSWORD@host``): split off the way HTTP clients read them,
and masked for display.

Role: the driver's HTTP clients (the Schema Registry client, the Pushgateway push) take user
info from a URL and must send it, and every message that shows such a URL must show it without
the password. Both rest on one reading of the URL: the authority runs from ``://`` to the first
``/``, ``?`` or ``#``, and its user info is everything before the last ``@`` in it. A password
with an unencoded ``/``, ``?`` or ``#`` (or an unencoded ``@`` after one of them) therefore
puts an ``@`` after the authority's end, where an HTTP client would read a host made of part of
the password: :func:`split_user_info` refuses such a URL (:class:`UserInfoError`, whose message
says to percent-encode the password and quotes nothing), and :func:`mask_url` masks everything
up to the last ``@`` of the URL, so no part of such a password is shown either.

:func:`shown_value` is how any error quotes a value given by the user: at most
:data:`SHOWN_CHARS` characters of it, then how long it was.

Invariants:
- :class:`UserInfoError` messages and :func:`mask_url` results never contain any character of a
  URL's user info, however it is written.
- A message quoting a value through :func:`shown_value` stays short whatever the value's length.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field

__all__ = [
    "SHOWN_CHARS",
    "SplitUrl",
    "UserInfoError",
    "mask_url",
    "shown_value",
    "split_user_info",
]

#: How many characters of a value an error message quotes.
SHOWN_CHARS = 64
_AUTHORITY_END = "/?#"
_ENCODE_HINT = (
    "percent-encode the user name and password (/ as %2F, ? as %3F, # as %23, @ as %40, "
    ": as %3A, % as %25)"
)


class UserInfoError(ValueError):
    """A URL whose user info an HTTP client would read differently; names no part of it."""


@dataclass(frozen=True)
class SplitUrl:
    """A URL without its user info, and that user info decoded; ``repr`` shows the URL only."""

    url: str
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    @property
    def has_user_info(self) -> bool:
        return self.user is not None


def _authority_end(rest: str) -> int:
    return min((i for i in (rest.find(c) for c in _AUTHORITY_END) if i >= 0), default=len(rest))


def split_user_info(url: str) -> SplitUrl:
    """``url`` split into the URL without user info and the decoded user name and password.

    Raises :class:`UserInfoError` when an ``@`` follows the authority's end: the user info then
    holds an unencoded ``/``, ``?`` or ``#``, and a client would send neither it nor the request
    to the intended host.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return SplitUrl(url)
    end = _authority_end(rest)
    if "@" in rest[end:]:
        raise UserInfoError(
            "the URL has an '@' after its host: if it belongs to credentials in the URL, "
            + _ENCODE_HINT
        )
    info, at, host = rest[:end].rpartition("@")
    if not at:
        return SplitUrl(url)
    user, colon, password = info.partition(":")
    return SplitUrl(
        f"{scheme}://{host}{rest[end:]}",
        urllib.parse.unquote(user),
        urllib.parse.unquote(password) if colon else None,
    )


def mask_url(url: str) -> str:
    """``url`` as it may be shown: any user info replaced by ``***``; never raises.

    When an ``@`` follows the authority's end (a password with an unencoded ``/``, ``?`` or
    ``#``), everything up to the last ``@`` is masked.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "***@" + url.rpartition("@")[2] if "@" in url else url
    end = _authority_end(rest)
    if "@" in rest[end:]:
        return f"{scheme}://***@{rest.rpartition('@')[2]}"
    if "@" in rest[:end]:
        return f"{scheme}://***@{rest[:end].rpartition('@')[2]}{rest[end:]}"
    return url


def shown_value(value: str, limit: int = SHOWN_CHARS) -> str:
    """``value`` quoted for an error message: its first ``limit`` characters, then its length."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}…({len(value)} characters)"
