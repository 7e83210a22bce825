"""``.proto`` text as Protobuf descriptors and message classes, compiled by Google's protoc.

Role: the bridge between a schema's text and the ``protobuf`` library. ``compile_proto(text)``
runs protoc (the ``grpcio-tools`` package bundles it as a Python extension, with the
well-known types' ``.proto`` files) on the text and returns the ``FileDescriptorProto``;
``message_class(text)`` builds the file in a private descriptor pool and returns the generated
class of its first message, as ``protoc --python_out`` would give it;
``parse_protobuf_schema(text)`` reads an explicit ``.proto`` (a ``value.schema`` or a
registered schema) into the ``ProtoSchema`` tree the encoder follows: its first message, with
the scalar types, ``optional``, ``repeated`` and ``map`` fields and messages nested in the
file that the derived mapping uses (fields in number order, as Protobuf writes them); other
field types (enums, ``sint``/``uint``/``fixed`` integers, imported messages, oneofs, proto2
files, unpacked repeated scalars) are refused naming the field. So is a message that contains
itself (directly, through other messages, a ``repeated`` field or a map value: legal proto3,
but a recursion no Spark type can express), naming the message type and the cycle, and messages
nested more than ``nesting.MAX_NESTING`` levels; a message used by several fields is read once
and shared (time linear in the file). Used by the producer
serializer's per-record path, by the parsing of an explicit ``value.schema`` / ``key.schema``,
and by tests, which compare the columnar encoder with that class's ``SerializeToString``.

Invariants: protoc's errors are raised as :class:`~kafka_sink.sink_errors.SinkSchemaError`
with protoc's own message (line and column); each compiled text gets its own pool, so two
schemas that declare the same message name never clash; ``protobuf`` and ``grpcio-tools`` are
imported when called (the optional ``protobuf`` extra), with an install hint when absent.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from kafka_sink.formats.nesting import MAX_NESTING, too_deep
from kafka_sink.formats.protobuf_schema import ProtoField, ProtoMessage, ProtoSchema
from kafka_sink.sink_errors import SinkSchemaError

__all__ = ["compile_proto", "message_class", "parse_protobuf_schema"]

_FILE_NAME = "schema.proto"


def _protoc() -> Any:
    try:
        from grpc_tools import protoc
    except ImportError:
        raise ImportError(
            "parsing .proto text needs grpcio-tools and protobuf: pip install "
            "'pykafka-sink[protobuf]'"
        ) from None
    return protoc


def compile_proto(text: str) -> Any:
    """The ``FileDescriptorProto`` of ``text`` (a proto2 or proto3 file, imports of the
    well-known types allowed); SinkSchemaError with protoc's message when it does not compile."""
    import importlib.resources

    from google.protobuf import descriptor_pb2

    protoc = _protoc()
    bundled = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, _FILE_NAME)
        out = os.path.join(tmp, "out.pb")
        with open(source, "w", encoding="utf-8") as f:
            f.write(text)
        errors = os.path.join(tmp, "errors.txt")
        # protoc reports to the process's stderr: route it to a file to name the error.
        saved = os.dup(2)
        try:
            with open(errors, "w") as err:
                os.dup2(err.fileno(), 2)
                code = protoc.main(
                    ["protoc", f"-I{tmp}", f"-I{bundled}", f"--descriptor_set_out={out}", source]
                )
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        if code != 0:
            with open(errors, encoding="utf-8") as err:
                message = err.read().replace(source, _FILE_NAME).strip()
            raise SinkSchemaError(f"the .proto schema does not compile: {message or code}")
        files = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            files.ParseFromString(f.read())
    file = files.file[0]
    file.name = _FILE_NAME
    return file


def message_class(text: str, file: Any = None) -> Any:
    """The generated class of the first message of ``text`` (``file``: its compiled form)."""
    from google.protobuf import descriptor_pool, message_factory

    file = compile_proto(text) if file is None else file
    pool = descriptor_pool.DescriptorPool()
    for dependency in file.dependency:
        _add_well_known(pool, dependency)
    built = pool.Add(file)
    del built
    descriptor = pool.FindFileByName(file.name)
    first = descriptor.message_types_by_name[file.message_type[0].name]
    return message_factory.GetMessageClass(first)


def _add_well_known(pool: Any, name: str) -> None:
    from google.protobuf import descriptor_pb2, descriptor_pool

    found = descriptor_pool.Default().FindFileByName(name)
    proto = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto)
    for dependency in proto.dependency:
        _add_well_known(pool, dependency)
    pool.Add(proto)


# FieldDescriptorProto.Type -> the scalar types the encoder writes.
_SCALAR_TYPES = {
    1: "double",
    2: "float",
    3: "int64",
    5: "int32",
    8: "bool",
    9: "string",
    12: "bytes",
}
_TYPE_MESSAGE = 11
_LABEL_REPEATED = 3


def parse_protobuf_schema(text: str, path: str = "value") -> ProtoSchema:
    """An explicit ``.proto`` text as the tree of its first message (see the module doc)."""
    file = compile_proto(text)
    if file.syntax != "proto3":
        raise SinkSchemaError(
            f"{path}: the .proto schema is {file.syntax or 'proto2'}; the sink writes proto3. "
            'Fix: start the schema with syntax = "proto3";'
        )
    if not file.message_type:
        raise SinkSchemaError(f"{path}: the .proto schema declares no message. Fix: add one")
    prefix = f".{file.package}" if file.package else ""
    nested: dict[str, Any] = {}

    def index(message: Any, scope: str) -> None:
        name = f"{scope}.{message.name}"
        nested[name] = message
        for inner in message.nested_type:
            index(inner, name)

    for message in file.message_type:
        index(message, prefix)
    root = file.message_type[0]
    walk = _Walk(nested)
    return ProtoSchema(
        walk.message(root, f"{prefix}.{root.name}", path, ()), file.package, given_text=text
    )


class _Walk:
    """The message tree, refusing what a Spark type cannot hold: ``within`` holds the full names
    of the messages enclosing the one read (a message met again inside itself is a recursion),
    and its length is the level, bounded by MAX_NESTING before descending. A message read once
    is kept with its height (its own level and those of the messages below it) and shared by
    every field of its type, so messages used by several fields at each level cost time linear
    in the file, not exponential in its depth."""

    def __init__(self, nested: dict[str, Any]) -> None:
        self.nested = nested
        self.done: dict[str, tuple[ProtoMessage, int]] = {}

    def message(self, message: Any, full: str, path: str, within: tuple[str, ...]) -> ProtoMessage:
        within = (*within, full)
        fields = []
        heights = [0]  # of the messages below this one
        for field in sorted(message.field, key=lambda f: f.number):
            child = f"{path}.{field.name}"
            if field.HasField("oneof_index") and not field.proto3_optional:
                raise SinkSchemaError(
                    f"{child}: oneof fields are not written. Fix: remove the oneof"
                )
            repeated = field.label == _LABEL_REPEATED
            if field.type == _TYPE_MESSAGE:
                target = self._target(field, child)
                if target.options.map_entry:
                    key, value = sorted(target.field, key=lambda f: f.number)
                    fields.append(self._map(field, key, value, child, within))
                    if value.type == _TYPE_MESSAGE:
                        heights.append(self.done[value.type_name][1])
                    continue
                label = "repeated" if repeated else "implicit"
                inner = self._nested(target, field.type_name, child, within)
                heights.append(self.done[field.type_name][1])
                fields.append(ProtoField(field.name, field.number, "message", label, inner))
                continue
            scalar = _scalar(field, child)
            if repeated and field.options.HasField("packed") and not field.options.packed:
                raise SinkSchemaError(f"{child}: [packed = false] is not written. Fix: remove it")
            label = "repeated" if repeated else "optional" if field.proto3_optional else "implicit"
            fields.append(ProtoField(field.name, field.number, scalar, label))
        built = ProtoMessage(message.name, tuple(fields))
        self.done[full] = (built, 1 + max(heights))
        return built

    def _target(self, field: Any, path: str) -> Any:
        target = self.nested.get(field.type_name)
        if target is None:
            raise SinkSchemaError(
                f"{path}: message {field.type_name.lstrip('.')} is not declared in the "
                "schema (imports are not written). Fix: declare it in the same file"
            )
        return target

    def _nested(self, target: Any, full: str, path: str, within: tuple[str, ...]) -> ProtoMessage:
        if full in within:
            cycle = " -> ".join(n.lstrip(".") for n in within[within.index(full) :])
            raise SinkSchemaError(
                f"{path}: message {full.lstrip('.')} contains itself ({cycle} -> "
                f"{full.lstrip('.')}), a recursion that Spark types cannot express. Fix: give a "
                "schema without the recursive field, or unroll it into distinct messages to "
                "the depth the data needs"
            )
        if full in self.done:
            known, height = self.done[full]
            if len(within) + height > MAX_NESTING:
                raise too_deep(path, "the .proto schema")
            return known
        if len(within) >= MAX_NESTING:
            raise too_deep(path, "the .proto schema")
        return self.message(target, full, path, within)

    def _map(
        self, field: Any, key: Any, value: Any, path: str, within: tuple[str, ...]
    ) -> ProtoField:
        key_type = _scalar(key, f"{path}.key")
        if value.type == _TYPE_MESSAGE:
            child = f"{path}.value"
            target = self._target(value, child)
            inner = self._nested(target, value.type_name, child, within)
            return ProtoField(field.name, field.number, "message", "map", inner, key_type)
        value_type = _scalar(value, f"{path}.value")
        return ProtoField(field.name, field.number, value_type, "map", None, key_type)


def _scalar(field: Any, path: str) -> str:
    found = _SCALAR_TYPES.get(field.type)
    if found is None:
        raise SinkSchemaError(
            f"{path}: Protobuf field type {field.type} (see FieldDescriptorProto.Type) is not "
            "one the sink writes (bool, int32, int64, float, double, string, bytes, messages, "
            "maps). Fix: use one of those in the schema"
        )
    return found
