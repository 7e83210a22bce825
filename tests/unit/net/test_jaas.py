"""sasl.jaas.config parsing: Java's StreamTokenizer rules (quotes, escapes, words, comments)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_sink.errors import ConfigError
from kafka_sink.net.config import ClientConfig, parse_jaas_config
from kafka_sink.net.jaas import parse_jaas

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.mark.parametrize(
    ("text", "username", "password"),
    [
        # An escaped backslash is one backslash; an escaped quote is a quote.
        (f'{SCRAM} required username="a\\\\b" password="p\\"q";', "a\\b", 'p"q'),
        # Single quotes are quotes too; the other kind needs no escape inside.
        (f"{SCRAM} required username='alice' password='it\"s';", "alice", 'it"s'),
        (f"{SCRAM} required username=\"o'neil\" password='x\\'y';", "o'neil", "x'y"),
        # Unquoted words (letters, digits, '_', '-', '$', '.'), any-case flag, spacing, comments.
        (f"{SCRAM}  REQUIRED\n username=bob_1 password = $ecret-2.x ;", "bob_1", "$ecret-2.x"),
        (f'{SCRAM} required /* who */ username="u" // note\n password="p";', "u", "p"),
        # Java's escapes: \t and octal.
        (f'{SCRAM} required username="t\\tab" password="\\101\\0";', "t\tab", "A\x00"),
        # A '/' inside quotes is data, not a comment; unicode passes through.
        (f'{SCRAM} sufficient username="a/b//c" password="päss";', "a/b//c", "päss"),
    ],
)
def test_values_java_accepts(text: str, username: str, password: str) -> None:
    assert parse_jaas_config(text) == ("SCRAM", username, password)


def test_entry_shape_and_repr_hides_values() -> None:
    entry = parse_jaas(f'{SCRAM} optional username="u" password="top-secret-1";')
    assert entry.login_module == SCRAM
    assert entry.control_flag == "optional"
    assert "top-secret-1" not in repr(entry)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f'{SCRAM} required username="u" password="secret-1"', r"not terminated by ';'"),
        (f'{SCRAM} required username="u" password="secret-1;', r"quoted string .* not closed"),
        (f'{SCRAM} demanded username="u" password="secret-1";', r"control flag"),
        (f'{SCRAM} required username="u" password=secret-1@x;', r"quote values"),
        (f'{SCRAM} required username="u" password=12345;', r"'password' .* must be quoted"),
        (f'{SCRAM} required username="u" password;', r"'password' needs '='"),
        (f'{SCRAM} required username="u" password="secret-1"; {SCRAM} required;', r"2 login"),
        ("   ", r"empty"),
        (f"{SCRAM}", r"control flag is missing"),
        (f'{SCRAM} required /* username="u" password="secret-1";', r"unterminated /\*"),
    ],
)
def test_malformed_values_are_clear_errors_without_the_password(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_jaas_config(text)
    assert str(info.value).startswith("sasl.jaas.config")
    assert "secret-1" not in str(info.value)
    assert "12345" not in str(info.value)


def test_producer_config_reads_escaped_jaas_credentials() -> None:
    config = ClientConfig.from_mapping(
        {
            "bootstrap.servers": "h:1",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": f'{SCRAM} required username="dom\\\\user" password="p\\"w";',
        }
    )
    assert (config.sasl_username, config.sasl_password) == ("dom\\user", 'p"w')
    assert 'p"w' not in repr(config)


def test_delegation_token_scram_is_refused() -> None:
    with pytest.raises(ConfigError, match="tokenauth"):
        parse_jaas_config(f'{SCRAM} required username="u" password="p" tokenauth="true";')


PIECES = ("Zq1", "Xk2", "Wj3", "Vy4", "pa_ss", "se.cret")


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.sampled_from(PIECES), min_size=1, max_size=5),
    seps=st.lists(
        st.sampled_from(['"', "'", " ", "=", ";", "\\", "/", "\n", "*", "@"]), max_size=5
    ),
    quote=st.sampled_from(['"', "'", ""]),
)
def test_a_mis_quoted_password_is_never_quoted_back(
    parts: list[str], seps: list[str], quote: str
) -> None:
    password = "".join(p + s for p, s in zip(parts, [*seps, *[""] * len(parts)], strict=False))
    text = f'{SCRAM} required username="u" password={quote}{password}{quote};'
    try:
        parse_jaas_config(text)
    except ConfigError as exc:
        shown = [p for p in PIECES if p in password and p in str(exc)]
        assert not shown, str(exc)


def test_an_unknown_option_name_is_placed_not_quoted() -> None:
    # 'cret' is the rest of a password whose quote closed too early: never shown.
    with pytest.raises(ConfigError, match=r"the option at position \d+ needs '='") as info:
        parse_jaas_config(f'{SCRAM} required username="u" password="se"cret;')
    assert "cret" not in str(info.value)
