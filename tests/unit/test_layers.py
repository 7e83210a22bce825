"""The layering of docs/architecture.md, checked on the source itself.

import-linter (``make lint``) checks the package-to-package layers; this test adds the rules it
cannot express well: which layers may touch sockets, threads and clocks, that pyspark stays in
``kafka_sink.spark``, and that no modules import each other in a circle. It reads every module's
imports from its AST, so a lazy import inside a function, or one under ``TYPE_CHECKING``, counts
as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kafka_sink"

LAYERS = ["wire", "records", "net", "formats", "admin", "producer", "spark", "testing", "report"]
SHARED_LEAVES = {"errors", "sink_errors", "clock", "prepared"}

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
    if layer in {"wire", "records", "errors", "sink_errors"}:
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


# -- rooms inside a layer ------------------------------------------------------------------------

# A room may not import these (module prefixes): transactions sit under the producer's facade;
# Spark's side is split by where code runs, the executor room and the driver room never loading
# each other nor the entry points (datasource, writer, workers) that use both.
_ENTRY_POINTS = (
    "kafka_sink.spark.datasource",
    "kafka_sink.spark.writer",
    "kafka_sink.spark.workers",
)
ROOM_RULES = {
    "producer/txn": (
        "kafka_sink.producer.producer",
        "kafka_sink.producer.sender",
        "kafka_sink.producer.bulk",
        "kafka_sink.producer.accumulator",
    ),
    "producer/metrics": (
        "kafka_sink.producer.producer",
        "kafka_sink.producer.sender",
        "kafka_sink.producer.bulk",
        "kafka_sink.producer.accumulator",
        "kafka_sink.producer.txn",
    ),
    "spark/driver": (*_ENTRY_POINTS, "kafka_sink.spark.executor", "kafka_sink.producer", "numpy"),
    "spark/executor": (*_ENTRY_POINTS, "kafka_sink.spark.driver"),
    "spark/commit_log": (*_ENTRY_POINTS, "kafka_sink.spark.driver", "kafka_sink.spark.executor"),
    "admin": ("kafka_sink.producer", "numpy", "pyarrow"),
    # Registry formats serve the producer's users too: no Spark, nor the producer (a serializer
    # is handed to it, it does not call it).
    "formats": ("kafka_sink.spark", "kafka_sink.producer", "pyspark"),
    # The sink's metrics: a task hands its producer in; nothing of Spark or either room.
    "spark/metrics": (
        *_ENTRY_POINTS,
        "pyspark",
        "kafka_sink.spark.driver",
        "kafka_sink.spark.executor",
        "kafka_sink.spark.commit_log",
        "kafka_sink.producer",
        "numpy",
    ),
}


def _in_room(path: Path, room: str) -> bool:
    return path.relative_to(PACKAGE).as_posix().startswith(room + "/")


@pytest.mark.parametrize("room", sorted(ROOM_RULES))
def test_room_keeps_to_itself(room: str) -> None:
    members = [path for path in MODULES if _in_room(path, room)]
    assert members, f"no module in kafka_sink/{room}"
    for path in members:
        bad = {
            name
            for name in _imports(path)
            for forbidden in ROOM_RULES[room]
            if name == forbidden or name.startswith(forbidden + ".")
        }
        assert not bad, f"{path.relative_to(PACKAGE)} must not import {sorted(bad)}"


# -- import circles -------------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the kafka_sink modules it imports, wherever the import statement is (at the
    top, in a function, under ``TYPE_CHECKING``)."""
    names = {_module_name(path): path for path in MODULES}

    def resolve(name: str) -> str | None:
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets: set[str | None] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(resolve(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:  # ``from pkg import module`` imports the module
                    submodule = f"{node.module}.{alias.name}"
                    targets.add(submodule if submodule in names else resolve(node.module))
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_the_graph_is_read() -> None:
    # Guards the circle check against passing on a misread graph.
    graph = _import_graph()
    assert "kafka_sink.net.metadata" in graph["kafka_sink.producer.sender"]
    assert "kafka_sink.spark.driver.eos.intents" in graph["kafka_sink.spark.driver.eos.plan_store"]


def test_no_import_circle_in_kafka_sink() -> None:
    # The layers contract rules out circles between layers; this looks at every module pair,
    # inside a layer and across, type-checking and in-function imports included.
    assert _circles(_import_graph()) == []
