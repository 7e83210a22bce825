"""The login's refresh schedule, retries and sharing, on a manual clock (no sleeping)."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import ConfigError
from kafka_sink.net.oauth.login import (
    RETRY_AFTER_FAILED_REFRESH_MS,
    OAuthBearerLogin,
    RefreshTimings,
    acquire_login,
    live_logins,
    release_login,
)
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSourceError

SOURCE = "https://idp.example/oauth2/token"


class ScriptedSource:
    """Answers each fetch with the next scripted lifetime (seconds) or error."""

    def __init__(self, clock: ManualClock, script: list[float | TokenSourceError]) -> None:
        self.clock = clock
        self.script = list(script)
        self.fetched_at: list[int] = []

    def fetch(self) -> OAuthBearerToken:
        self.fetched_at.append(self.clock.wall_ms())
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, TokenSourceError):
            raise step
        return OAuthBearerToken(
            f"token-{len(self.fetched_at)}",
            expires_at_ms=self.clock.wall_ms() + int(step * 1000),
        )

    def describe(self) -> str:
        return SOURCE


def down() -> TokenSourceError:
    return TokenSourceError(f"{SOURCE} is unreachable: connection refused", may_clear=True)


def refused() -> TokenSourceError:
    return TokenSourceError(f"{SOURCE} refused the client credentials (401)", may_clear=False)


class FixedRandom(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


def make(
    script: list[float | TokenSourceError],
    timings: RefreshTimings | None = None,
    jitter_draw: float = 0.0,
) -> tuple[OAuthBearerLogin, ScriptedSource, ManualClock]:
    clock = ManualClock()
    source = ScriptedSource(clock, script)
    login = OAuthBearerLogin(
        source,
        timings,
        clock=clock,
        rng=FixedRandom(jitter_draw),
        sleep=lambda s: clock.advance(round(s * 1000)),
    )
    return login, source, clock


def test_an_hour_token_is_refreshed_at_the_window_factor_plus_jitter() -> None:
    login, source, clock = make([3600], jitter_draw=0.5)
    start = clock.wall_ms()
    assert login.token().value == "token-1"
    # 0.8 + 0.05 * 0.5 of an hour
    assert login.refresh_at_ms == start + int(3_600_000 * 0.825)
    clock.advance(int(3_600_000 * 0.825) - 1)
    login.tick()
    assert len(source.fetched_at) == 1
    clock.advance(1)
    login.tick()
    assert len(source.fetched_at) == 2
    assert login.token().value == "token-2"


def test_the_refresh_is_no_later_than_the_buffer_before_expiry() -> None:
    # 0.95 of 20 minutes is 19 minutes, within 300 s of expiry: moved to expiry - 300 s.
    login, _, clock = make([1200], RefreshTimings(window_factor=0.95, window_jitter=0.0))
    start = clock.wall_ms()
    login.token()
    assert login.refresh_at_ms == start + 1_200_000 - 300_000


def test_the_refresh_is_no_earlier_than_the_minimum_period() -> None:
    # 0.5 of 7 minutes is 210 s, sooner than the 300 s minimum period: moved to 300 s, which
    # still leaves the 60 s buffer before expiry.
    timings = RefreshTimings(window_factor=0.5, window_jitter=0.0, min_period_s=300, buffer_s=60)
    login, _, clock = make([420], timings)
    start = clock.wall_ms()
    login.token()
    assert login.refresh_at_ms == start + 300_000


def test_a_token_shorter_than_min_period_plus_buffer_refreshes_at_the_window_alone() -> None:
    # 20 s tokens with Java's defaults (60 s + 300 s): refreshed at 80-85 % of their life.
    login, source, clock = make([20], jitter_draw=1.0)
    start = clock.wall_ms()
    login.token()
    assert login.refresh_at_ms == start + 17_000
    for lifetime in range(5):
        clock.advance(17_000)
        login.tick()
        assert len(source.fetched_at) == lifetime + 2
        assert login.token().expires_at_ms - clock.wall_ms() == 20_000


def test_jitter_spreads_the_refresh_over_the_window() -> None:
    times = set()
    for draw in (0.0, 0.25, 0.999):
        login, _, clock = make([100], RefreshTimings(min_period_s=0, buffer_s=0), draw)
        start = clock.wall_ms()
        login.token()
        assert login.refresh_at_ms is not None
        times.add(login.refresh_at_ms - start)
    assert times == {80_000, 81_250, 84_995}


def test_an_unreachable_endpoint_is_retried_with_doubling_backoff_within_the_budget() -> None:
    login, source, clock = make([down(), down(), down(), 60])
    start = clock.wall_ms()
    assert login.token().value == "token-4"
    assert [t - start for t in source.fetched_at] == [0, 100, 300, 700]


def test_retries_stop_at_the_backoff_max_and_the_error_names_the_endpoint() -> None:
    timings = RefreshTimings(retry_backoff_ms=100, retry_backoff_max_ms=1000)
    login, source, clock = make([down()], timings)
    start = clock.wall_ms()
    with pytest.raises(TokenSourceError, match="unreachable") as info:
        login.token()
    assert SOURCE in str(info.value)
    # 100, 200, 400, then the 300 ms left: the budget is spent.
    assert [t - start for t in source.fetched_at] == [0, 100, 300, 700, 1000]


def test_a_refusal_is_not_retried() -> None:
    login, source, _ = make([refused(), 60])
    with pytest.raises(TokenSourceError, match="refused"):
        login.token()
    assert len(source.fetched_at) == 1


def test_a_failed_refresh_keeps_the_token_retries_and_recovers_before_expiry() -> None:
    timings = RefreshTimings(min_period_s=0, buffer_s=0, window_jitter=0.0)
    login, source, clock = make([100, down(), down(), 100], timings)
    start = clock.wall_ms()
    login.token()
    clock.advance(80_000)
    login.tick()  # fails: retried after 100 ms
    assert login.token().value == "token-1"
    assert login.refresh_at_ms == start + 80_100
    clock.advance(100)
    login.tick()  # fails again: 200 ms
    assert login.refresh_at_ms == start + 80_300
    clock.advance(200)
    login.tick()
    assert login.token().value == "token-4"
    assert [t - start for t in source.fetched_at] == [0, 80_000, 80_100, 80_300]


def test_after_the_retry_budget_the_refresher_waits_ten_seconds_between_attempts() -> None:
    timings = RefreshTimings(
        min_period_s=0, buffer_s=0, window_jitter=0.0, retry_backoff_max_ms=250
    )
    login, _, clock = make([100, down()], timings)
    login.token()
    clock.advance(80_000)
    login.tick()  # failing since 80 000: +100
    clock.advance(100)
    login.tick()  # +200
    clock.advance(200)
    login.tick()  # 300 ms into the run of failures: beyond 250, wait 10 s
    assert login.refresh_at_ms == clock.wall_ms() + RETRY_AFTER_FAILED_REFRESH_MS
    # Expired and never refreshed: a caller's fetch raises the source's error.
    clock.advance(20_000)
    with pytest.raises(TokenSourceError, match=SOURCE):
        login.token()


def test_a_refused_refresh_waits_ten_seconds() -> None:
    timings = RefreshTimings(min_period_s=0, buffer_s=0, window_jitter=0.0)
    login, _, clock = make([100, refused()], timings)
    login.token()
    clock.advance(80_000)
    login.tick()
    assert login.refresh_at_ms == clock.wall_ms() + RETRY_AFTER_FAILED_REFRESH_MS


def test_an_expired_token_from_the_source_is_refused() -> None:
    login, _, _ = make([-1])
    with pytest.raises(TokenSourceError, match="already expired"):
        login.token()


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("sasl.login.refresh.window.factor", "0.4", r"out of range \[0.5, 1.0\]"),
        ("sasl.login.refresh.window.jitter", "0.3", r"out of range \[0.0, 0.25\]"),
        ("sasl.login.refresh.min.period.seconds", "901", r"out of range \[0, 900\]"),
        ("sasl.login.refresh.buffer.seconds", "3601", r"out of range \[0, 3600\]"),
        ("sasl.login.retry.backoff.ms", "-1", "out of range"),
        ("sasl.login.retry.backoff.max.ms", "soon", "expected an integer"),
        ("sasl.login.refresh.window.factor", "high", "expected a number"),
    ],
)
def test_refresh_settings_out_of_javas_ranges_are_refused(key: str, value: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        RefreshTimings.from_settings({key: value})
    assert str(info.value).startswith(key)


def test_refresh_settings_are_read() -> None:
    timings = RefreshTimings.from_settings(
        {
            "sasl.login.refresh.window.factor": "0.9",
            "sasl.login.refresh.window.jitter": 0.1,
            "sasl.login.refresh.min.period.seconds": "5",
            "sasl.login.refresh.buffer.seconds": 7,
            "sasl.login.retry.backoff.ms": "50",
            "sasl.login.retry.backoff.max.ms": "500",
        }
    )
    assert timings == RefreshTimings(0.9, 0.1, 5, 7, 50, 500)


class WallSource:
    def __init__(self, lifetime_s: float) -> None:
        self.lifetime_s = lifetime_s
        self.count = 0

    def fetch(self) -> OAuthBearerToken:
        self.count += 1
        return OAuthBearerToken(
            f"t{self.count}", expires_at_ms=int((time.time() + self.lifetime_s) * 1000)
        )

    def describe(self) -> str:
        return "wall source"


@pytest.fixture
def no_leaked_logins() -> Iterator[None]:
    yield
    assert live_logins() == []


@pytest.mark.usefixtures("no_leaked_logins")
def test_one_login_per_configuration_shared_and_stopped_with_its_last_client() -> None:
    source = WallSource(0.5)
    settings = {"sasl.oauthbearer.token.provider": source}
    first = acquire_login(settings, lambda: source)
    second = acquire_login(dict(settings), lambda: source)
    other = acquire_login(
        {**settings, "sasl.login.refresh.min.period.seconds": "0"}, lambda: WallSource(3600)
    )
    try:
        assert first is second
        assert other is not first
        assert first.running
        # Its own thread refreshes a 0.5 s token with nobody asking: 0.8-0.85 of its life.
        first.token()
        deadline = time.monotonic() + 5
        while source.count < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert source.count >= 3
        threads = [t for t in threading.enumerate() if t.name == "pykafka-oauth-refresh"]
        assert len(threads) >= 2
    finally:
        release_login(first)
        assert first.running
        release_login(second)
        release_login(other)
    assert not first.running
    assert not other.running


class BrokenSource:
    def fetch(self) -> OAuthBearerToken:
        raise KeyError("client_secret=hunter2")

    def describe(self) -> str:
        return "package.module:provider"


def test_a_source_raising_something_else_fails_as_a_token_error_without_its_text() -> None:
    clock = ManualClock()
    login = OAuthBearerLogin(
        BrokenSource(),
        RefreshTimings(retry_backoff_max_ms=300),
        clock=clock,
        sleep=lambda s: clock.advance(round(s * 1000)),
    )
    with pytest.raises(TokenSourceError) as info:
        login.token()
    assert str(info.value) == "package.module:provider failed with KeyError"
    assert info.value.may_clear
    # Not chained either: a traceback of it does not show the original text.
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.usefixtures("no_leaked_logins")
def test_a_forked_child_restarts_the_refresher_of_a_login_it_inherited() -> None:
    source = WallSource(3600)
    login = acquire_login({"sasl.oauthbearer.token.provider": source}, lambda: source)
    try:
        login.token()
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 only if the refresher runs again here
            code = 1
            try:
                login.token()
                code = 0 if login.running else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert login.running
    finally:
        release_login(login)
