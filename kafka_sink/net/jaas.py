"""``sasl.jaas.config`` parsing with the syntax Java's Kafka client accepts.

Java reads the value with ``java.io.StreamTokenizer`` (``JaasConfig``); this module follows the
same token rules so that a value that works for a Java client means the same here:

- ``<LoginModule> <flag> key=value ... ;`` where the flag is ``required``, ``requisite``,
  ``sufficient`` or ``optional`` (any case) and the entry ends with ``;``.
- A value (or key) is a word or a quoted string. Words start with a letter, ``_``, ``$`` or a
  character from U+00A0 up, and go on with those, digits, ``.`` and ``-``. Anything else (``@``,
  ``:``, a leading digit ...) needs quotes, as in Java, where a bare number is no value.
- Quoted strings use ``"`` or ``'``; a backslash escapes the next character (``\\\\`` is one
  backslash, ``\\"`` a quote), ``\\n``-style escapes and octal ``\\0``..``\\377`` are decoded as
  Java does. A quoted string may not run past the end of the line.
- ``//`` and ``/* */`` comments are skipped (a lone ``/`` starts a line comment, as in Java).
- The client property holds exactly one login module entry (Java's ``JaasContext`` rule).

Invariants: error messages name positions, and option keys only when they are one of
:data:`KNOWN_OPTIONS`; never values (they hold passwords), nor a word that stands where a key is
read (after a quote closed too early, it is the rest of a password).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_sink.errors import ConfigError

__all__ = ["CONTROL_FLAGS", "KNOWN_OPTIONS", "JaasEntry", "parse_jaas"]

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
#: Option names of the login modules Kafka clients use (PLAIN, SCRAM, OAUTHBEARER, GSSAPI): the
#: only option names an error message quotes.
KNOWN_OPTIONS = frozenset(
    {
        "username",
        "password",
        "tokenauth",
        "unsecuredLoginStringClaim_sub",
        "clientId",
        "clientSecret",
        "scope",
        "useKeyTab",
        "keyTab",
        "storeKey",
        "principal",
        "useTicketCache",
        "serviceName",
        "debug",
    }
)

_KEY = "sasl.jaas.config"
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry. ``repr`` shows option keys only."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(repr=False)

    def __repr__(self) -> str:
        return (
            f"JaasEntry({self.login_module!r}, {self.control_flag!r}, "
            f"options={sorted(self.options)!r})"
        )


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "quoted", "number", "char"
    text: str  # for "char": the character itself (never shown in errors)
    pos: int


def _is_word_start(c: str) -> bool:
    return (c.isascii() and (c.isalpha() or c in "_$")) or ord(c) >= 0xA0


def _is_word_part(c: str) -> bool:
    return _is_word_start(c) or c in "0123456789.-"


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if ord(c) <= 0x20:
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    raise ConfigError(f"{_KEY}: unterminated /* comment at position {i}")
                i = end + 2
            else:  # '//' or a lone '/': a comment to the end of the line
                while i < n and text[i] not in "\r\n":
                    i += 1
        elif c in "\"'":
            value, i = _quoted(text, i)
            out.append(_Token("quoted", value, i))
        elif _is_word_start(c):
            start = i
            while i < n and _is_word_part(text[i]):
                i += 1
            out.append(_Token("word", text[start:i], start))
        elif c.isdigit() or c == "." or (c == "-" and i + 1 < n and text[i + 1] in "0123456789."):
            start = i
            i += 1
            while i < n and (text[i].isdigit() or text[i] == "."):
                i += 1
            out.append(_Token("number", text[start:i], start))
        else:
            out.append(_Token("char", c, i))
            i += 1
    return out


def _quoted(text: str, start: int) -> tuple[str, int]:
    quote = text[start]
    chars: list[str] = []
    i, n = start + 1, len(text)
    while i < n:
        c = text[i]
        if c == quote:
            return "".join(chars), i + 1
        if c in "\r\n":
            break
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in "01234567":
                # Octal: up to three digits, the third only when the first is 0-3 (Java).
                digits = nxt
                j = i + 2
                limit = 3 if nxt in "0123" else 2
                while j < n and len(digits) < limit and text[j] in "01234567":
                    digits += text[j]
                    j += 1
                chars.append(chr(int(digits, 8)))
                i = j
                continue
            chars.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        chars.append(c)
        i += 1
    raise ConfigError(
        f"{_KEY}: the quoted string starting at position {start} is not closed on its line"
    )


def parse_jaas(text: str) -> JaasEntry:
    """Parse a client ``sasl.jaas.config`` value into its single login module entry."""
    tokens = _tokens(text)
    if not tokens:
        raise ConfigError(f"{_KEY}: empty; expected '<LoginModule> required key=\"value\" ...;'")
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        entry, i = _entry(tokens, i)
        entries.append(entry)
    if len(entries) != 1:
        raise ConfigError(
            f"{_KEY}: holds {len(entries)} login module entries; the client property takes "
            "exactly one"
        )
    return entries[0]


def _entry(tokens: list[_Token], i: int) -> tuple[JaasEntry, int]:
    module = tokens[i]
    if module.kind not in ("word", "quoted"):
        raise ConfigError(f"{_KEY}: expected a login module class name at position {module.pos}")
    i += 1
    if i >= len(tokens):
        raise ConfigError(f"{_KEY}: the login module control flag is missing")
    flag_token = tokens[i]
    flag = flag_token.text.lower() if flag_token.kind in ("word", "quoted") else ""
    if flag not in CONTROL_FLAGS:
        raise ConfigError(
            f"{_KEY}: expected a control flag ({', '.join(CONTROL_FLAGS)}) after the login "
            f"module, at position {flag_token.pos}"
        )
    i += 1
    options: dict[str, str] = {}
    while True:
        if i >= len(tokens):
            raise ConfigError(f"{_KEY}: the login module entry is not terminated by ';'")
        key = tokens[i]
        if key.kind == "char" and key.text == ";":
            return JaasEntry(module.text, flag, options), i + 1
        if key.kind not in ("word", "quoted"):
            raise ConfigError(
                f"{_KEY}: expected an option name at position {key.pos}; quote values that "
                "contain characters other than letters, digits, '_', '$', '.' and '-'"
            )
        name = key.text
        # Where a quote closed too early, the rest of a password stands where a name is read:
        # only the names of the login modules' own options are shown, others by position.
        shown = f"option {name!r}" if name in KNOWN_OPTIONS else f"the option at position {key.pos}"
        if i + 1 >= len(tokens) or tokens[i + 1].kind != "char" or tokens[i + 1].text != "=":
            raise ConfigError(f"{_KEY}: {shown} needs '=' and a value")
        if i + 2 >= len(tokens) or tokens[i + 2].kind not in ("word", "quoted"):
            raise ConfigError(
                f"{_KEY}: the value of {shown} is missing or must be quoted "
                "(Java reads only words and quoted strings as values)"
            )
        options[name] = tokens[i + 2].text
        i += 3
