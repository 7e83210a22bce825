"""The layering of ARCHITECTURE.md, checked on the source itself.

import-linter (``make lint``) checks the package-to-package layers; this test adds the rules it
cannot express well: which layers may touch sockets, threads and clocks, and that pyspark stays in
``kafka_sink.spark``. It reads every module's imports from its AST, so a lazy import inside a
function counts as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kafka_sink"

LAYERS = ["wire", "records", "net", "admin", "producer", "spark", "testing"]
SHARED_LEAVES = {"errors", "clock", "prepared"}

# Pure layers are bytes in, bytes out: no I/O, no threads, no clock.
PURE_FORBIDDEN = {"socket", "selectors", "ssl", "threading", "time", "asyncio"}
SOCKET_MODULES = {"socket", "selectors", "ssl"}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _layer_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _top(name: str) -> str:
    return name.split(".", maxsplit=1)[0]


def _internal_layer(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "kafka_sink" or len(parts) < 2:
        return None
    return parts[1]


MODULES = _modules()


def test_the_package_has_modules_to_check() -> None:
    # Guards against the checks below passing vacuously on an empty or moved tree.
    assert len(MODULES) > 10


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_respects_layers(path: Path) -> None:
    layer = _layer_of(path)
    imports = _imports(path)
    tops = {_top(name) for name in imports}

    # The clock is the one shared leaf that reads time; errors.py is as pure as wire/.
    if layer in {"wire", "records", "errors"}:
        assert not tops & PURE_FORBIDDEN, f"{path.name} is pure but imports {tops & PURE_FORBIDDEN}"
    if layer not in {"net", "testing"}:
        assert not tops & SOCKET_MODULES, f"only kafka_sink.net may use sockets ({path.name})"
    if layer != "spark":
        assert "pyspark" not in tops, f"only kafka_sink.spark may import pyspark ({path.name})"

    if layer in LAYERS:
        allowed = set(LAYERS[: LAYERS.index(layer) + 1]) | SHARED_LEAVES
        for name in imports:
            target = _internal_layer(name)
            if target is not None and target in LAYERS:
                assert target in allowed, f"{path.name} ({layer}) must not import {name}"
    elif layer in SHARED_LEAVES:
        for name in imports:
            target = _internal_layer(name)
            assert target is None or target in SHARED_LEAVES, f"{path.name} imports {name}"
