"""README's "Managed Kafka" recipes, read as the options they set.

Each recipe is a fenced ``python`` block of that section; it is named by the first words of the
paragraph before it. :func:`recipe_options` returns its ``.option(key, value)`` calls in order:
a literal value as written, any other expression (a variable, an f-string) as None, to be filled
in by whoever runs the recipe. :func:`recipe_sink_options` is a recipe run here: the sink's own
option parsing (preset included) of the recipe with this machine's addresses and secrets put in.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

from kafka_sink.spark.options import SinkOptions

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Managed Kafka"


def recipes(text: str | None = None) -> dict[str, str]:
    """Paragraph opening -> the code of the recipe under it, in README order."""
    text = README.read_text(encoding="utf-8") if text is None else text
    _, _, rest = text.partition(f"\n{SECTION}\n")
    section = rest.split("\n## ", 1)[0]
    found: dict[str, str] = {}
    paragraph: list[str] = []
    ended = False  # a blank line closed the paragraph: the next prose line starts another
    code: list[str] | None = None
    for line in section.splitlines():
        if code is not None:
            if line.startswith("```"):
                found[" ".join(paragraph)] = "\n".join(code)
                code, paragraph = None, []
            else:
                code.append(line)
        elif line.startswith("```python"):
            code = []
        elif not line.strip():
            ended = True
        else:
            if ended:
                paragraph, ended = [], False
            paragraph.append(line.strip())
    return found


def recipe_options(opening: str, text: str | None = None) -> list[tuple[str, str | None]]:
    """The options of the recipe whose paragraph starts with ``opening``."""
    matches = [code for title, code in recipes(text).items() if title.startswith(opening)]
    if len(matches) != 1:
        raise LookupError(f"{len(matches)} recipes start with {opening!r}")
    options: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(matches[0], mode="eval")):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "option":
            key, value = node.args
            assert isinstance(key, ast.Constant) and isinstance(key.value, str)
            literal = value.value if isinstance(value, ast.Constant) else None
            options.append((key.value, None if literal is None else str(literal)))
    # ast.walk meets the outermost call (the last .option) first.
    return options[::-1]


#: What a run here may put into a recipe: where the services are, the secrets, and the
#: protocol (the test listeners have no TLS, so ``SASL_SSL`` becomes ``SASL_PLAINTEXT``).
REPLACEABLE = frozenset(
    {
        "kafka.bootstrap.servers",
        "kafka.security.protocol",
        "kafka.sasl.username",
        "kafka.sasl.password",
        "kafka.sasl.oauthbearer.token.endpoint.url",
        "kafka.sasl.oauthbearer.client.credentials.client.id",
        "kafka.sasl.oauthbearer.client.credentials.client.secret",
    }
)


def recipe_sink_options(opening: str, replace: Mapping[str, str]) -> SinkOptions:
    """The recipe's options with ``replace`` put in, parsed as the sink parses them."""
    return SinkOptions.from_options(recipe_run_options(opening, replace))


def recipe_run_options(opening: str, replace: Mapping[str, str]) -> dict[str, str]:
    """The recipe's options with ``replace`` put in: what a run here passes to ``.options()``.

    Only :data:`REPLACEABLE` keys are replaced; every value the recipe leaves to its user (a
    variable) must be among them, and everything else stays as README writes it.
    """
    options = recipe_options(opening)
    given = {key for key, _ in options}
    unknown = set(replace) - REPLACEABLE
    if unknown:
        raise ValueError(f"a recipe run may not replace {sorted(unknown)}")
    missing = {key for key, value in options if value is None} - set(replace)
    if missing:
        raise ValueError(f"the recipe leaves {sorted(missing)} to its user: replace them")
    added = set(replace) - given - {"kafka.security.protocol"}
    if added:
        raise ValueError(f"the recipe does not set {sorted(added)}")
    merged = {key: replace.get(key, value) for key, value in options}
    merged.update(replace)
    return {k: v for k, v in merged.items() if v is not None}
