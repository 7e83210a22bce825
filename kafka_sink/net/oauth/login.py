"""The OAUTHBEARER login: one valid token per process and configuration, refreshed ahead of expiry.

Role: :class:`OAuthBearerLogin` holds the current token of one :class:`TokenSource` and renews it
on a timer thread of its own (an idle producer in a cached worker still holds a valid token when
its next batch comes), following Java's ``ExpiringCredentialRefreshingLogin``:

- after a token is had at time ``t`` with expiry ``e``, the next refresh is at
  ``t + (e - t) * (window.factor + window.jitter * random())`` (``sasl.login.refresh.window.factor``
  0.8, ``.window.jitter`` 0.05), moved no earlier than ``min.period.seconds`` (60) after ``t``
  and no later than ``buffer.seconds`` (300) before ``e``; when the token lives shorter than
  ``min.period.seconds + buffer.seconds``, those two bounds cannot both hold and the window alone
  decides (as in Java);
- a fetch that fails with ``may_clear`` (endpoint unreachable, a 5xx) is retried after
  ``sasl.login.retry.backoff.ms`` (100), doubling, for at most ``sasl.login.retry.backoff.max.ms``
  (10000) in all; then, and after a refusal (a bad secret: not retried at once), the refresher
  tries again :data:`RETRY_AFTER_FAILED_REFRESH_MS` later while the current token still lives
  (Java waits the same 10 s between failed re-logins);
- :meth:`OAuthBearerLogin.token` answers from the cache; with no live token (the first use, or
  every refresh failed until expiry) it fetches on the caller's thread, with the same bounded
  retries, and raises the source's :class:`TokenSourceError` when that fails.

:func:`acquire_login` / :func:`release_login` share one login per process and configuration key
(the client's OAUTHBEARER settings): every client with the same settings uses the same token and
the same refresher thread, which stops when the last client releases it.

Invariants:
- Expiry and refresh times are wall-clock epoch ms (tokens' ``exp`` is); the timer waits on
  differences of them, bounded, and re-reads the clock on every wake-up.
- The token is never logged; log lines and errors name the source (``describe()``) only.
- A process forked while it held logins (a Spark worker forked from its daemon) gets them with
  fresh locks and restarts their refresher on first use: threads do not survive a fork.
- Every wait is bounded: a fetch by its source's timeouts and the retry budget, the thread's
  sleep by the next due time (and at most :data:`_MAX_WAIT_S`), :meth:`stop` by a join timeout.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafka_sink.clock import SYSTEM_CLOCK, Clock
from kafka_sink.errors import ConfigError
from kafka_sink.net.oauth.keys import OAUTH_SOURCE_KEYS
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSource, TokenSourceError

__all__ = [
    "REFRESH_KEYS",
    "RETRY_AFTER_FAILED_REFRESH_MS",
    "OAuthBearerLogin",
    "RefreshTimings",
    "acquire_login",
    "configuration_key",
    "live_logins",
    "oauth_keys",
    "release_login",
    "source_for",
]

log = logging.getLogger(__name__)

#: Java's pause between failed re-logins while the current credential still lives.
RETRY_AFTER_FAILED_REFRESH_MS = 10_000
_MAX_WAIT_S = 60.0
_JOIN_S = 5.0


def _parse_float(key: str, raw: object, lo: float, hi: float) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ConfigError(f"{key}: expected a number, got {type(raw).__name__}")
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{key}: expected a number, got {str(raw)[:40]!r}") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{key}: {value} is out of range [{lo}, {hi}]")
    return value


def _parse_int(key: str, raw: object, lo: int, hi: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise ConfigError(f"{key}: expected an integer, got {type(raw).__name__}")
    try:
        value = int(raw.strip() if isinstance(raw, str) else raw)
    except ValueError:
        raise ConfigError(f"{key}: expected an integer, got {str(raw)[:40]!r}") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{key}: {value} is out of range [{lo}, {hi}]")
    return value


@dataclass(frozen=True)
class RefreshTimings:
    """The ``sasl.login.refresh.*`` and ``sasl.login.retry.*`` settings (Java's defaults and
    ranges)."""

    window_factor: float = 0.8  # sasl.login.refresh.window.factor, [0.5, 1.0]
    window_jitter: float = 0.05  # sasl.login.refresh.window.jitter, [0, 0.25]
    min_period_s: int = 60  # sasl.login.refresh.min.period.seconds, [0, 900]
    buffer_s: int = 300  # sasl.login.refresh.buffer.seconds, [0, 3600]
    retry_backoff_ms: int = 100  # sasl.login.retry.backoff.ms
    retry_backoff_max_ms: int = 10_000  # sasl.login.retry.backoff.max.ms

    @classmethod
    def from_settings(cls, settings: Mapping[str, object]) -> RefreshTimings:
        def get(key: str) -> object | None:
            value = settings.get(key)
            return None if value is None or value == "" else value

        kwargs: dict[str, float | int] = {}
        for key, attr, lo, hi in (
            ("sasl.login.refresh.window.factor", "window_factor", 0.5, 1.0),
            ("sasl.login.refresh.window.jitter", "window_jitter", 0.0, 0.25),
        ):
            if (raw := get(key)) is not None:
                kwargs[attr] = _parse_float(key, raw, lo, hi)
        for key, attr, ilo, ihi in (
            ("sasl.login.refresh.min.period.seconds", "min_period_s", 0, 900),
            ("sasl.login.refresh.buffer.seconds", "buffer_s", 0, 3600),
            ("sasl.login.retry.backoff.ms", "retry_backoff_ms", 0, 2**63 - 1),
            ("sasl.login.retry.backoff.max.ms", "retry_backoff_max_ms", 0, 2**63 - 1),
        ):
            if (raw := get(key)) is not None:
                kwargs[attr] = _parse_int(key, raw, ilo, ihi)
        return cls(**kwargs)  # type: ignore[arg-type]

    def refresh_at_ms(self, obtained_ms: int, expires_ms: int, rng: random.Random) -> int:
        """When a token had at ``obtained_ms`` that expires at ``expires_ms`` is renewed."""
        lifetime = expires_ms - obtained_ms
        if lifetime <= 0:
            return obtained_ms
        factor = self.window_factor + self.window_jitter * rng.random()
        proposed = obtained_ms + int(lifetime * factor)
        min_period_ms, buffer_ms = self.min_period_s * 1000, self.buffer_s * 1000
        if min_period_ms + buffer_ms > lifetime:
            # Both bounds cannot hold for so short a token: the window alone decides.
            return proposed
        proposed = max(proposed, obtained_ms + min_period_ms)
        return min(proposed, expires_ms - buffer_ms)


#: The keys :class:`RefreshTimings` reads.
REFRESH_KEYS: frozenset[str] = frozenset(
    {
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.retry.backoff.ms",
        "sasl.login.retry.backoff.max.ms",
    }
)


#: The key that names the token source; given programmatically it may be the source itself.
PROVIDER_KEY = "sasl.oauthbearer.token.provider"


def oauth_keys() -> frozenset[str]:
    """Every key a client accepts with ``sasl.mechanism=OAUTHBEARER`` only."""
    return OAUTH_SOURCE_KEYS | REFRESH_KEYS | {PROVIDER_KEY}


def source_for(settings: Mapping[str, object]) -> TokenSource:
    """The token source of ``settings``: a :class:`TokenSource` object given as
    ``sasl.oauthbearer.token.provider`` as it is, else what
    :func:`~kafka_sink.net.oauth.sources.token_source` builds (which checks every key)."""
    provider = settings.get(PROVIDER_KEY)
    if _is_source(provider):
        assert provider is not None
        return provider  # type: ignore[return-value]
    # Only a client with OAUTHBEARER builds a source: the others never import the OIDC and HTTP
    # machinery under it.
    from kafka_sink.net.oauth.sources import token_source

    return token_source(settings)


def _is_source(value: object) -> bool:
    return (
        value is not None
        and not isinstance(value, str)
        and callable(getattr(value, "fetch", None))
        and callable(getattr(value, "describe", None))
    )


class OAuthBearerLogin:
    """The current token of one source, refreshed ahead of expiry (see the module docstring).

    ``clock.wall_ms()`` is the time compared with expiries; ``sleep`` waits between the
    retries of a fetch on the caller's thread (tests pass one that advances a manual clock).
    The refresher thread starts with :meth:`start`; tests may instead call :meth:`tick`.
    """

    def __init__(
        self,
        source: TokenSource,
        timings: RefreshTimings | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._source = source
        self._timings = timings or RefreshTimings()
        self._clock = clock
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._lock = threading.Lock()  # the fields below
        self._fetch_lock = threading.Lock()  # one fetch at a time
        self._token: OAuthBearerToken | None = None
        self._obtained_ms: int | None = None
        self._refresh_at_ms: int | None = None
        # The retry state of the refresher: when the current run of failures began, the next
        # backoff, and the last failure (shown when no live token is left).
        self._failing_since_ms: int | None = None
        self._next_backoff_ms = self._timings.retry_backoff_ms
        self._last_error: TokenSourceError | None = None
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        #: How many tokens were had (for tests and metrics; never the tokens).
        self.fetch_count = 0
        # Set in a forked child (a Spark worker forked from its daemon): the refresher thread
        # did not survive the fork and the locks may have been held at that moment.
        self._forked = False

    # -- what clients use -----------------------------------------------------------------------
    def describe(self) -> str:
        return self._source.describe()

    @property
    def timings(self) -> RefreshTimings:
        return self._timings

    def token(self) -> OAuthBearerToken:
        """A token that has not expired: the cached one, or one fetched now (bounded)."""
        if self._forked:
            self._restart_after_fork()
        live = self._live_token()
        if live is not None:
            return live
        with self._fetch_lock:
            live = self._live_token()  # another caller may have fetched meanwhile
            if live is not None:
                return live
            return self._fetch_with_retries()

    @property
    def refresh_at_ms(self) -> int | None:
        """The wall-clock ms of the next refresh (None: no token yet)."""
        with self._lock:
            return self._refresh_at_ms

    # -- the refresher --------------------------------------------------------------------------
    def tick(self) -> None:
        """Refresh now if due (the timer thread's step; tests call it after moving the clock)."""
        with self._lock:
            due = self._refresh_at_ms
        if due is None or self._clock.wall_ms() < due:
            return
        with self._fetch_lock:
            with self._lock:
                due = self._refresh_at_ms
            if due is None or self._clock.wall_ms() < due:
                return
            self._refresh_once()

    def start(self) -> None:
        """Start the refresher thread (a daemon; idempotent)."""
        with self._lock:
            if self._thread is not None or self._stopped:
                return
            self._thread = threading.Thread(
                target=self._run, name="pykafka-oauth-refresh", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the refresher thread (bounded); the cached token stays usable until it expires."""
        with self._lock:
            self._stopped = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_S)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._fetch_lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = None
        self._forked = True

    def _restart_after_fork(self) -> None:
        self._forked = False
        if not self._stopped:
            self.start()

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                due = self._refresh_at_ms
            now = self._clock.wall_ms()
            wait_s = _MAX_WAIT_S if due is None else max(due - now, 0) / 1000
            if self._wake.wait(min(wait_s, _MAX_WAIT_S)):
                self._wake.clear()
                continue
            try:
                self.tick()
            except Exception:  # the thread must outlive a bug in a user's source
                log.exception("OAUTHBEARER refresher: unexpected error from %s", self.describe())
                with self._lock:
                    self._refresh_at_ms = self._clock.wall_ms() + RETRY_AFTER_FAILED_REFRESH_MS

    # -- internals ------------------------------------------------------------------------------
    def _live_token(self) -> OAuthBearerToken | None:
        with self._lock:
            token = self._token
        if token is not None and self._clock.wall_ms() < token.expires_at_ms:
            return token
        return None

    def _accept(self, token: OAuthBearerToken) -> OAuthBearerToken:
        now = self._clock.wall_ms()
        if token.expires_at_ms <= now:
            raise TokenSourceError(
                f"{self.describe()} returned a token that has already expired", may_clear=False
            )
        refresh_at = self._timings.refresh_at_ms(now, token.expires_at_ms, self._rng)
        with self._lock:
            self._token = token
            self._obtained_ms = now
            self._refresh_at_ms = refresh_at
            self._failing_since_ms = None
            self._next_backoff_ms = self._timings.retry_backoff_ms
            self._last_error = None
            self.fetch_count += 1
        self._wake.set()
        log.debug(
            "OAUTHBEARER token from %s: expires in %.1f s, refresh in %.1f s",
            self.describe(),
            (token.expires_at_ms - now) / 1000,
            (refresh_at - now) / 1000,
        )
        return token

    def _fetch_with_retries(self) -> OAuthBearerToken:
        """Fetch on the caller's thread: may_clear failures retried with backoff, bounded."""
        began = self._clock.now_ms()
        backoff = self._timings.retry_backoff_ms
        while True:
            try:
                return self._accept(self._fetch_once())
            except TokenSourceError as exc:
                self._remember(exc)
                left = self._timings.retry_backoff_max_ms - (self._clock.now_ms() - began)
                if not exc.may_clear or left <= 0:
                    raise
                wait = min(backoff, left)
                log.info(
                    "OAUTHBEARER: %s; retrying in %d ms", exc, wait
                )  # the message names the source, never a secret
                self._sleep(wait / 1000)
                backoff *= 2

    def _refresh_once(self) -> None:
        """One refresher attempt; reschedules itself after a failure."""
        now = self._clock.wall_ms()
        try:
            self._accept(self._fetch_once())
            return
        except TokenSourceError as exc:
            self._remember(exc)
            error = exc
        with self._lock:
            if self._failing_since_ms is None:
                self._failing_since_ms = now
            in_budget = now - self._failing_since_ms < self._timings.retry_backoff_max_ms
            if error.may_clear and in_budget:
                delay = self._next_backoff_ms
                self._next_backoff_ms = min(delay * 2, self._timings.retry_backoff_max_ms)
            else:
                delay = RETRY_AFTER_FAILED_REFRESH_MS
                self._failing_since_ms = None
                self._next_backoff_ms = self._timings.retry_backoff_ms
            token = self._token
            self._refresh_at_ms = now + max(delay, 1)
        left_s = (token.expires_at_ms - now) / 1000 if token is not None else 0.0
        log.warning(
            "OAUTHBEARER token refresh failed: %s; trying again in %d ms (current token %s)",
            error,
            delay,
            f"valid for {left_s:.1f} s more" if left_s > 0 else "expired",
        )

    def _fetch_once(self) -> OAuthBearerToken:
        """One fetch; anything but a TokenSourceError (a bug in a user's source) becomes one,
        shown by its type only (its text may hold what the source was given)."""
        try:
            return self._source.fetch()
        except TokenSourceError:
            raise
        except Exception as exc:
            raise TokenSourceError(
                f"{self.describe()} failed with {type(exc).__name__}", may_clear=True
            ) from None

    def _remember(self, exc: TokenSourceError) -> None:
        with self._lock:
            self._last_error = exc

    def __repr__(self) -> str:
        with self._lock:
            token, refresh_at = self._token, self._refresh_at_ms
        expires = None if token is None else token.expires_at_ms
        return (
            f"OAuthBearerLogin(source={self.describe()!r}, expires_at_ms={expires}, "
            f"refresh_at_ms={refresh_at})"
        )


# -- one login per process and configuration --------------------------------------------------

_REGISTRY_LOCK = threading.Lock()
_LOGINS: dict[str, tuple[OAuthBearerLogin, int]] = {}


def configuration_key(settings: Mapping[str, object]) -> str:
    """A digest of ``settings`` naming one login (objects by identity; secrets only hashed)."""
    digest = hashlib.sha256()
    for key in sorted(settings):
        value = settings[key]
        shown = (
            repr(value)
            if isinstance(value, str | int | float | bool) or value is None
            else (f"<object {id(value)}>")
        )
        digest.update(f"{key}\x00{shown}\x01".encode())
    return digest.hexdigest()


def acquire_login(
    settings: Mapping[str, object], source_factory: Callable[[], TokenSource]
) -> OAuthBearerLogin:
    """The process's login for ``settings`` (made with ``source_factory`` and started on first
    use); release it with :func:`release_login`."""
    key = configuration_key(settings)
    with _REGISTRY_LOCK:
        entry = _LOGINS.get(key)
        if entry is not None:
            _LOGINS[key] = (entry[0], entry[1] + 1)
            return entry[0]
        login = OAuthBearerLogin(source_factory(), RefreshTimings.from_settings(settings))
        _LOGINS[key] = (login, 1)
    login.start()
    return login


def release_login(login: OAuthBearerLogin) -> None:
    """One client is done with ``login``; the last one stops its refresher."""
    with _REGISTRY_LOCK:
        for key, (held, count) in list(_LOGINS.items()):
            if held is login:
                if count > 1:
                    _LOGINS[key] = (held, count - 1)
                    return
                del _LOGINS[key]
                break
        else:
            return
    login.stop()


def _after_fork_in_child() -> None:
    global _REGISTRY_LOCK  # noqa: PLW0603 - a fresh lock for the child process
    _REGISTRY_LOCK = threading.Lock()
    for login, _ in _LOGINS.values():
        login._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def live_logins() -> list[OAuthBearerLogin]:
    """Every login some client holds (for tests: none should outlive its clients)."""
    with _REGISTRY_LOCK:
        return [login for login, _ in _LOGINS.values()]
