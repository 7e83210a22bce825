"""Credentials in URLs: split as an HTTP client reads them, masked for display, never shown.

The property tests build passwords out of marker pieces (``Zq1``, ``Xk2``...) joined by the
characters that end a URL's authority or user info (``/ ? # @ :``), so "no part of the
password is shown" is checked piece by piece, not only for the whole password.
"""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_sink.net.user_info import (
    SHOWN_CHARS,
    UserInfoError,
    mask_url,
    shown_value,
    split_user_info,
)

PIECES = ("Zq1", "Xk2", "Wj3", "Vy4")
#: A password of marker pieces and separators; it always holds at least one separator.
passwords = st.builds(
    lambda parts, seps: "".join(p + s for p, s in zip(parts, seps, strict=False)),
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=5),
    st.lists(st.sampled_from("/?#@:%"), min_size=5, max_size=5),
).filter(lambda pw: any(c in pw for c in "/?#@:"))


def leaked(text: str, password: str) -> list[str]:
    return [p for p in PIECES if p in password and p in text]


@given(password=passwords, path=st.sampled_from(["", "/", "/api/v1", "/x?y=1#f"]))
def test_a_password_is_never_shown_whatever_it_holds(password: str, path: str) -> None:
    url = f"https://bob:{password}@registry.example.com:8081{path}"
    assert not leaked(mask_url(url), password)
    try:
        split = split_user_info(url)
    except UserInfoError as exc:
        assert not leaked(str(exc), password)
        assert "percent-encode" in str(exc)
        assert any(c in password for c in "/?#")
    else:
        # Read as a client reads it, or not at all: never a host made of part of the password.
        assert split.url == f"https://registry.example.com:8081{path}"
        assert (split.user, split.password) == ("bob", urllib.parse.unquote(password))
        assert not leaked(repr(split), password)


@given(password=passwords)
def test_a_percent_encoded_password_is_taken_whole(password: str) -> None:
    url = f"http://bob:{urllib.parse.quote(password, safe='')}@gw:9091/p"
    split = split_user_info(url)
    assert (split.url, split.user, split.password) == ("http://gw:9091/p", "bob", password)
    assert mask_url(url) == "http://***@gw:9091/p"


def test_urls_without_user_info_pass_unchanged() -> None:
    for url in ("http://gw:9091", "https://r:8081/ctx?x=1", "gw:9091", "http://[::1]:80/"):
        assert mask_url(url) == url
        assert split_user_info(url).url == url
        assert not split_user_info(url).has_user_info


def test_a_user_without_password_is_user_info_too() -> None:
    split = split_user_info("http://token@gw:9091")
    assert (split.url, split.user, split.password) == ("http://gw:9091", "token", None)
    assert mask_url("http://token@gw:9091") == "http://***@gw:9091"


@pytest.mark.parametrize("length", [0, 1, SHOWN_CHARS, SHOWN_CHARS + 1, 100_000])
def test_shown_values_are_capped(length: int) -> None:
    value = "v" * length
    shown = shown_value(value)
    assert len(shown) < SHOWN_CHARS + 40
    if length > SHOWN_CHARS:
        assert f"({length} characters)" in shown
    else:
        assert shown == repr(value)
