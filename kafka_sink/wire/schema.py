"""Declarative message schemas and the one generic, version-aware codec that interprets them.

Role: every request/response is a dataclass whose fields are declared once with
:func:`kfield` (wire type in Apache JSON spelling, version range, nullable range, tag, default),
in wire order and named as the snake_case of Apache's JSON field names. :func:`encode` and
:func:`decode` turn such a dataclass into bytes and back for any version the class declares.
Flexible versions (KIP-482: compact strings/bytes/arrays, a TAGGED_FIELDS section ending every
struct) are handled here and nowhere else.

Theory of operation: for each (class, version, flexible) the codec compiles a plan once: the
fields present in that version, each bound to a small encode/decode closure. Runs of adjacent
fixed-width fields (ints, bools, floats) are merged into one precompiled ``struct.Struct`` so a
ProduceResponse partition is decoded with a single ``unpack_from``; decoded values go straight
into the dataclass's positional constructor. Plans are cached (a benign race: two threads may
compile the same plan, and either result is correct), so the declaration stays the single source
of truth and there is no code generation.

Invariants:
- Top-level message classes carry ``VALID_VERSIONS`` (inclusive range) and ``FLEXIBLE_VERSIONS``
  (first flexible version, or None); nested structs inherit flexibility from their message.
- Fields absent from a version are skipped when encoding (their value is ignored) and take their
  declared default when decoding.
- A tagged field is written only when its value differs from its default (None/empty = absent);
  unknown tags are skipped when reading.
- Every field has a default, so decoders build objects from the fields present only.
- ``records`` values are passed to the writer by reference: a record batch is copied once.
- Encoding errors (null in a non-nullable field, out-of-range int) and malformed input raise
  :class:`~kafka_sink.errors.ProtocolError`.
"""

from __future__ import annotations

import dataclasses
import operator
import struct
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from kafka_sink.errors import ProtocolError
from kafka_sink.wire.primitives import ZERO_UUID, Reader, Writer

__all__ = [
    "FieldSpec",
    "Message",
    "VersionRange",
    "decode",
    "decode_from",
    "encode",
    "encode_into",
    "field_specs",
    "is_flexible",
    "kfield",
    "struct_class",
]

_METADATA_KEY = "kafka"
_MISSING: Any = dataclasses.MISSING

# Fixed-width primitives: struct format character and width.
_FIXED: dict[str, str] = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
}
_PRIMITIVES = frozenset({*_FIXED, "uuid", "string", "bytes", "records"})


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive version range; ``high`` None means open-ended ("3+"); empty means "none"."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        text = text.strip()
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return self.low <= version and (self.high is None or version <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{self.low}+"
        if self.high < self.low:
            return "none"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


_NONE = VersionRange(1, 0)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one dataclass field travels on the wire."""

    type: str
    versions: VersionRange
    nullable_versions: VersionRange = _NONE
    tag: int | None = None
    default: Any = None


class Message(Protocol):
    """What the codec needs from a top-level request/response class."""

    VALID_VERSIONS: ClassVar[tuple[int, int]]
    FLEXIBLE_VERSIONS: ClassVar[int | None]


M = TypeVar("M")


def kfield(
    type_: str,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    tag: int | None = None,
    default: Any = _MISSING,
    repr: bool = True,
) -> Any:
    """Declare a protocol field: ``type_`` is the Apache JSON type ("int32", "[]int32", "string",
    "records", "[]TopicProduceData", "LeaderIdAndEpoch", ...); ``versions`` and ``nullable`` are
    Apache version ranges; ``tag`` marks a tagged field. Without ``default`` the Apache default
    is used: 0, false, "", empty array, zero UUID; null for nullable-from-v0 strings/bytes and
    for single structs (meaning "absent"). ``repr=False`` keeps secrets (SASL tokens) out of
    the dataclass repr."""
    nullable_range = VersionRange.parse(nullable) if nullable else _NONE
    if default is _MISSING:
        default = _implicit_default(type_, nullable_range)
    spec = FieldSpec(type_, VersionRange.parse(versions), nullable_range, tag, default)
    metadata = {_METADATA_KEY: spec}
    if isinstance(default, list):
        if default:
            raise ValueError("list defaults must be empty")
        return dataclasses.field(default_factory=list, metadata=metadata, repr=repr)
    return dataclasses.field(default=default, metadata=metadata, repr=repr)


def _implicit_default(type_: str, nullable: VersionRange) -> Any:
    if type_.startswith("[]"):
        return []
    if type_ in _FIXED:
        return False if type_ == "bool" else 0
    if type_ == "uuid":
        return ZERO_UUID
    if type_ in ("string", "bytes", "records"):
        if type_ == "records" or 0 in nullable:
            return None
        return "" if type_ == "string" else b""
    return None  # a single struct: None means "not present"


def field_specs(cls: type) -> list[tuple[str, FieldSpec]]:
    """(attribute name, spec) for every protocol field of a dataclass, in wire order."""
    out = []
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(_METADATA_KEY)
        if spec is not None:
            out.append((f.name, spec))
    return out


def is_flexible(cls: type, version: int) -> bool:
    first: int | None = getattr(cls, "FLEXIBLE_VERSIONS", None)
    return first is not None and version >= first


# --------------------------------------------------------------------------------------------
# Compilation
# --------------------------------------------------------------------------------------------

Encoder = Callable[[Writer, Any], None]
Decoder = Callable[[Reader], Any]


@dataclass(slots=True)
class _Plan:
    encode: Encoder
    decode: Decoder


_PLANS: dict[tuple[type, int, bool], _Plan] = {}


def _plan(cls: type, version: int, flexible: bool) -> _Plan:
    key = (cls, version, flexible)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _compile_struct(cls, version, flexible)
        _PLANS[key] = plan
    return plan


def struct_class(owner: type, attr: str) -> type:
    """The dataclass named by a field's annotation (``list[X]``, ``X | None``, ...)."""
    module = sys.modules[owner.__module__]
    localns: dict[str, Any] = {}
    scope: Any = module
    for part in owner.__qualname__.split("."):
        scope = getattr(scope, part)
        localns.update(vars(scope))
    annotation = {f.name: f.type for f in dataclasses.fields(owner)}[attr]
    # Annotations are strings (PEP 563); resolve one the way typing.get_type_hints would.
    hint = eval(annotation, vars(module), localns) if isinstance(annotation, str) else annotation
    found = _find_dataclass(hint)
    if found is None:
        raise TypeError(f"{owner.__qualname__}.{attr}: annotation names no dataclass")
    return found


def _find_dataclass(hint: Any) -> type | None:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is not None:
        for arg in typing.get_args(hint):
            found = _find_dataclass(arg)
            if found is not None:
                return found
    return None


def _compile_struct(cls: type, version: int, flexible: bool) -> _Plan:
    all_fields = dataclasses.fields(cls)
    index_of = {f.name: i for i, f in enumerate(all_fields)}
    # Positional constructor arguments start as the defaults; decoding overwrites the fields
    # present in this version. Fields with a default_factory (lists) get a fresh value per object.
    defaults: list[Any] = []
    factories: list[tuple[int, Callable[[], Any]]] = []
    for i, f in enumerate(all_fields):
        if f.default_factory is not dataclasses.MISSING:
            defaults.append(None)
            factories.append((i, f.default_factory))
        else:
            defaults.append(f.default)

    # Encode steps: (attrgetter, encoder); decode steps: (start, stop, decoder) where a run of
    # adjacent fixed-width fields is one step writing values[start:stop] from one unpack_from.
    enc_steps: list[tuple[Callable[[Any], Any], Encoder]] = []
    dec_steps: list[tuple[int, int, Decoder]] = []
    tagged: list[tuple[int, str, Encoder, Decoder, Any]] = []
    run: list[tuple[str, str]] = []

    def close_run() -> None:
        if not run:
            return
        names = tuple(name for name, _ in run)
        fmt = struct.Struct(">" + "".join(_FIXED[t] for _, t in run))
        enc_steps.append((operator.attrgetter(*names), _fixed_run_encoder(fmt, names, cls)))
        first = index_of[names[0]]
        dec_steps.append((first, first + len(names), _fixed_run_decoder(fmt)))
        run.clear()

    for name, spec in field_specs(cls):
        if version not in spec.versions:
            close_run()  # keep each run contiguous in constructor order
            continue
        if spec.tag is not None:
            close_run()
            if flexible:
                enc, dec = _field_codec(cls, name, spec, version, flexible)
                tagged.append((spec.tag, name, enc, dec, spec.default))
            continue
        if spec.type in _FIXED:
            run.append((name, spec.type))
            continue
        close_run()
        enc, dec = _field_codec(cls, name, spec, version, flexible)
        enc_steps.append((operator.attrgetter(name), enc))
        dec_steps.append((index_of[name], -1, dec))
    close_run()
    tagged.sort(key=lambda t: t[0])
    tagged_by_tag = {tag: (index_of[name], dec) for tag, name, _enc, dec, _default in tagged}

    def encode_struct(w: Writer, obj: Any) -> None:
        for get, enc in enc_steps:
            enc(w, get(obj))
        if flexible:
            pairs: list[tuple[int, bytes]] = []
            for tag, name, enc, _dec, default in tagged:
                value = getattr(obj, name)
                if value is None or value == default:
                    continue
                sub = Writer()
                enc(sub, value)
                pairs.append((tag, sub.getvalue()))
            w.tagged_fields(pairs)

    def decode_struct(r: Reader) -> Any:
        values = defaults.copy()
        for i, factory in factories:
            values[i] = factory()
        for start, stop, dec in dec_steps:
            if stop < 0:
                values[start] = dec(r)
            else:
                values[start:stop] = dec(r)
        if flexible:
            count = r.uvarint()
            if count:
                _decode_tags(r, values, count)
        return cls(*values)

    def _decode_tags(r: Reader, values: list[Any], count: int) -> None:
        for tag, raw in r.tagged_fields(count):
            known = tagged_by_tag.get(tag)
            if known is not None:
                sub = Reader(raw)
                values[known[0]] = known[1](sub)
                if sub.remaining:
                    raise ProtocolError(f"{cls.__qualname__}: tagged field {tag} has extra bytes")

    return _Plan(encode_struct, decode_struct)


def _fixed_run_encoder(fmt: struct.Struct, names: tuple[str, ...], cls: type) -> Encoder:
    pack = fmt.pack
    single = len(names) == 1

    def enc(w: Writer, values: Any) -> None:
        try:
            w.raw(pack(values) if single else pack(*values))
        except struct.error as exc:
            raise ProtocolError(f"{cls.__qualname__}: cannot encode {names}: {exc}") from None

    return enc


def _fixed_run_decoder(fmt: struct.Struct) -> Decoder:
    def dec(r: Reader) -> Any:
        return r.unpack(fmt)

    return dec


def _field_codec(
    owner: type, name: str, spec: FieldSpec, version: int, flexible: bool
) -> tuple[Encoder, Decoder]:
    nullable = version in spec.nullable_versions
    where = f"{owner.__qualname__}.{name} (v{version})"
    type_ = spec.type
    if type_.startswith("[]"):
        elem = type_[2:]
        if elem == "int32":
            return _int32_array_codec(flexible, nullable, where)
        if elem in _PRIMITIVES:
            e_enc, e_dec = _primitive_codec(elem, flexible, False, where)
        else:
            sub = _plan(_checked_struct_class(owner, name, elem), version, flexible)
            e_enc, e_dec = sub.encode, sub.decode
        return _array_codec(e_enc, e_dec, flexible, nullable, where)
    if type_ in _PRIMITIVES:
        return _primitive_codec(type_, flexible, nullable, where)
    sub = _plan(_checked_struct_class(owner, name, type_), version, flexible)
    return sub.encode, sub.decode


def _checked_struct_class(owner: type, name: str, type_name: str) -> type:
    """The annotation's struct class, which must carry the name the declaration gives."""
    found = struct_class(owner, name)
    if found.__name__ != type_name:
        raise TypeError(
            f"{owner.__qualname__}.{name}: declared {type_name!r}, annotated {found.__name__!r}"
        )
    return found


def _primitive_codec(
    type_: str, flexible: bool, nullable: bool, where: str
) -> tuple[Encoder, Decoder]:
    if type_ in _FIXED:
        fmt = struct.Struct(">" + _FIXED[type_])

        def enc_fixed(w: Writer, v: Any) -> None:
            try:
                w.raw(fmt.pack(v))
            except struct.error as exc:
                raise ProtocolError(f"{where}: cannot encode {v!r}: {exc}") from None

        def dec_fixed(r: Reader) -> Any:
            return r.unpack(fmt)[0]

        return enc_fixed, dec_fixed
    if type_ == "uuid":
        return Writer.uuid, Reader.uuid
    # string, bytes and records (nullable bytes in practice): a length, then the bytes; only the
    # Writer/Reader method tells them apart.
    write, read = (
        (Writer.string, Reader.string) if type_ == "string" else (Writer.bytes_, Reader.bytes_)
    )

    def enc_sized(w: Writer, v: Any) -> None:
        if v is None and not nullable:
            raise ProtocolError(f"{where}: null is not allowed")
        write(w, v, compact=flexible, nullable=nullable)

    def dec_sized(r: Reader) -> Any:
        return read(r, flexible, nullable)

    return enc_sized, dec_sized


def _int32_array_codec(flexible: bool, nullable: bool, where: str) -> tuple[Encoder, Decoder]:
    def enc(w: Writer, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ProtocolError(f"{where}: null is not allowed")
            w.array_length(None, compact=flexible)
            return
        try:
            w.int32_array(v, len(v), compact=flexible)
        except struct.error as exc:
            raise ProtocolError(f"{where}: cannot encode {v!r}: {exc}") from None

    def dec(r: Reader) -> Any:
        return r.int32_array(flexible, nullable)

    return enc, dec


def _array_codec(
    e_enc: Encoder, e_dec: Decoder, flexible: bool, nullable: bool, where: str
) -> tuple[Encoder, Decoder]:
    def enc(w: Writer, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ProtocolError(f"{where}: null is not allowed")
            w.array_length(None, compact=flexible)
            return
        w.array_length(len(v), compact=flexible)
        for item in v:
            e_enc(w, item)

    def dec(r: Reader) -> Any:
        count = r.array_length(flexible)
        if count == -1:
            if not nullable:
                raise ProtocolError(f"{where}: null array is not allowed")
            return None
        return [e_dec(r) for _ in range(count)]

    return enc, dec


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def _check_version(cls: type, version: int) -> bool:
    valid: tuple[int, int] | None = getattr(cls, "VALID_VERSIONS", None)
    if valid is None:
        raise TypeError(f"{cls.__qualname__} is not a top-level message class")
    if not valid[0] <= version <= valid[1]:
        raise ProtocolError(
            f"{cls.__qualname__} v{version} is not implemented (valid: {valid[0]}-{valid[1]})"
        )
    return is_flexible(cls, version)


def encode_into(w: Writer, msg: object, version: int) -> None:
    """Append the body of ``msg`` at ``version`` to ``w``."""
    cls = type(msg)
    flexible = _check_version(cls, version)
    _plan(cls, version, flexible).encode(w, msg)


def encode(msg: object, version: int) -> bytes:
    """The body bytes of ``msg`` at ``version`` (no header, no size prefix)."""
    w = Writer()
    encode_into(w, msg, version)
    return w.getvalue()


def decode_from(cls: type[M], r: Reader, version: int) -> M:
    """Read one ``cls`` body at ``version`` from ``r`` (which may hold more bytes after it)."""
    flexible = _check_version(cls, version)
    try:
        result: M = _plan(cls, version, flexible).decode(r)
    except struct.error as exc:  # defensive: Reader checks lengths first
        raise ProtocolError(f"{cls.__qualname__} v{version}: {exc}") from None
    return result


def decode(cls: type[M], data: bytes | bytearray | memoryview, version: int) -> M:
    """Decode a whole ``cls`` body at ``version``; trailing bytes are a ProtocolError."""
    r = Reader(data)
    msg = decode_from(cls, r, version)
    if r.remaining:
        raise ProtocolError(
            f"{cls.__qualname__} v{version}: {r.remaining} unexpected trailing bytes"
        )
    return msg
