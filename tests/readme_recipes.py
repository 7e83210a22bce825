"""README's "Managed Kafka" recipes, read as the options they set.

Each recipe is a fenced ``python`` block of that section; it is named by the first words of the
paragraph before it. :func:`recipe_options` returns its ``.option(key, value)`` calls in order:
a literal value as written, any other expression (a variable, an f-string) as None, to be filled
in by whoever runs the recipe.
"""

from __future__ import annotations

import ast
from pathlib import Path

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
