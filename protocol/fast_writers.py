"""Encoders for kio's message classes, generated from kio's own schema metadata.

kio stays the schema: the classes, their dataclass fields and each field's metadata
(``kafka_type``, ``tag``, the class's ``__flexible__``, nullability in the type hints).
What this module replaces is kio's *writer* (``kio.serial.entity_writer``), a generic
recursive walk that costs a Python call per field and a phantom-type check per integer.
For each class, on first use, it writes the source of one straight-line function --
the whole tree of nested entities inlined, loops for arrays -- compiles it once and
caches it by class. ``writer_source(cls)`` shows the text.

What the generated code does, field kind by field kind (the bytes are kio's, a test
compares them for every API, version and direction kio knows):

- Runs of fixed-width fields (ints of every width, bool, float64, error codes, uuids,
  millisecond timedeltas and timestamps, legacy string/bytes/array lengths, nullable
  struct markers, an empty tagged-field section) are packed by one precompiled
  ``struct.Struct``, across nested-entity boundaries where the layout allows.
- Compact lengths are unsigned varints from a table (a function beyond 127).
- Tagged fields: a field equal to its default (kio's rule: the field's default, else
  its implicit default) is left out; the present ones are written in tag order after
  their count, each as tag, size, value.
- Timedeltas and timestamps are converted exactly as kio does:
  ``round(value.total_seconds() * 1000)``, ``round(value.timestamp() * 1000)``; a null
  timestamp is -1 and a null uuid the zero uuid.

No phantom-type check runs at encode time: values come from our own builders. A value
of the wrong type still fails loudly -- ``struct.error`` for a non-integer or an
out-of-range integer, ``AttributeError`` or ``TypeError`` for a wrong object -- and never
writes other bytes. (Two leniencies, both exact on the wire: an error code may be a plain
``int``, and a legacy string or bytes too long for its length field raises
``struct.error`` where kio raises its ``OutOfBoundValue``.) Like kio, ``None`` for an
array writes the null array whatever the schema's nullability says.

A writer appends to a ``bytearray``: ``writer_for(cls)(out, entity)``.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import types
import typing
from collections.abc import Callable
from typing import Any, Final, TypeVar

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.static.constants import uuid_zero

from protocol.source_gen import SourceGen, load_source
from protocol.varint import UVARINT

__all__ = (
    "VARIABLE_TYPES",
    "FastWriter",
    "encode",
    "is_entity",
    "strip_optional",
    "writer_for",
    "writer_source",
)

E = TypeVar("E")
FastWriter = Callable[[bytearray, E], None]
"""Appends the encoding of one entity to ``out``."""


_UV: Final = UVARINT  # the generated code's name for it


class _ArrayPackers(dict[int, Callable[..., bytes]]):
    """``packers[n](*items)``: an array of ``n`` numbers of one struct code, its count
    first. Packers are kept for the counts seen up to 256, made on the fly beyond."""

    def __init__(self, code: str, compact: bool) -> None:
        super().__init__()
        self.code = code
        self.compact = compact

    def __missing__(self, count: int) -> Callable[..., bytes]:
        packer: Callable[..., bytes]
        if not self.compact or count < 127:  # the count fits a struct code: one pack
            fmt = f">{'B' if self.compact else 'i'}{count}{self.code}"
            packer = functools.partial(struct.Struct(fmt).pack, count + self.compact)
        else:
            prefix = _UV[count + 1]
            pack = struct.Struct(f">{count}{self.code}").pack

            def packer(*items: Any) -> bytes:
                return prefix + pack(*items)

        if count <= 256:
            self[count] = packer
        return packer


# kafka_type -> struct code and the expression of the value ("{}" is the field).
_FIXED: Final[dict[str, tuple[str, str]]] = {
    "int8": ("b", "{}"),
    "int16": ("h", "{}"),
    "int32": ("i", "{}"),
    "int64": ("q", "{}"),
    "uint8": ("B", "{}"),
    "uint16": ("H", "{}"),
    "uint32": ("I", "{}"),
    "uint64": ("Q", "{}"),
    "float64": ("d", "{}"),
    "bool": ("?", "{}"),
    "error_code": ("h", "{}"),  # an IntEnum: struct takes it as its value
    "timedelta_i32": ("i", "round({}.total_seconds() * 1000)"),
    "timedelta_i64": ("q", "round({}.total_seconds() * 1000)"),
    "datetime_i64": ("q", "round({}.timestamp() * 1000)"),
}
VARIABLE_TYPES: Final = frozenset({"string", "bytes", "records"})


def strip_optional(tp: Any) -> tuple[Any, bool]:
    """A kio field type without its ``| None``, and whether it had one (nullable)."""
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = typing.get_args(tp)
        inner = [arg for arg in args if arg is not type(None)]
        if len(inner) != 1:  # pragma: no cover - kio invariant
            raise TypeError(f"unsupported union {tp!r}")
        return inner[0], len(inner) < len(args)
    return tp, False


def is_entity(tp: Any) -> bool:
    """Whether a kio field type is a nested message (a dataclass) rather than a scalar."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


class _Gen(SourceGen):
    """The source of one writer: its lines, and (``SourceGen``) unique local names and
    the constants its namespace holds (packers, defaults)."""

    def __init__(self) -> None:
        super().__init__({"_UV": _UV, "_ZERO": uuid_zero.bytes})
        self.lines: list[str] = []

    def packer(self, fmt: str) -> str:
        return self.struct_method(fmt, "pack")


class _Block:
    """Statements at one indentation level that append to ``out``. Fixed-width values
    wait in ``codes``/``args`` until a statement that writes something else needs them
    written first (``flush``)."""

    def __init__(self, gen: _Gen, out: str, indent: int) -> None:
        self.gen = gen
        self.out = out
        self.indent = indent
        self.codes: list[str] = []
        self.args: list[str] = []
        self.start = len(gen.lines)

    def line(self, text: str) -> None:
        """A statement that writes nothing (it may run before pending values)."""
        self.gen.lines.append("    " * self.indent + text)

    def fixed(self, code: str, arg: str | None) -> None:
        self.codes.append(code)
        if arg is not None:
            self.args.append(arg)

    def write(self, text: str) -> None:
        """A statement that writes: pending fixed values go first."""
        self.flush()
        self.line(text)

    def flush(self) -> None:
        if not self.codes:
            return
        fmt = ">" + "".join(self.codes)
        if self.args:
            self.line(f"{self.out} += {self.gen.packer(fmt)}({', '.join(self.args)})")
        else:
            self.line(f"{self.out} += {self.gen.constant(struct.pack(fmt), '_K')}")
        self.codes.clear()
        self.args.clear()

    def nested(self, header: str, out: str | None = None) -> _Block:
        """Open ``header`` (an ``if``/``for``/``else`` line) and return its body."""
        self.write(header)
        return _Block(self.gen, self.out if out is None else out, self.indent + 1)

    def close(self) -> None:
        self.flush()
        if len(self.gen.lines) == self.start:
            self.line("pass")


def _local(block: _Block, expr: str, prefix: str = "v") -> str:
    if expr.isidentifier():
        return expr
    name = block.gen.name(prefix)
    block.line(f"{name} = {expr}")
    return name


def _scalar(block: _Block, kafka_type: str, expr: str, flexible: bool, nullable: bool) -> None:
    out = block.out
    if kafka_type in _FIXED:
        code, template = _FIXED[kafka_type]
        if not nullable:
            block.fixed(code, template.format(expr))
        elif kafka_type == "datetime_i64":
            v = _local(block, expr)
            block.fixed(code, f"-1 if {v} is None else {template.format(v)}")
        else:  # kio has no writer for it either
            raise NotImplementedError(f"nullable {kafka_type} field")
    elif kafka_type == "uuid":  # kio writes None as the zero uuid, nullable or not
        v = _local(block, expr)
        block.fixed("16s", f"_ZERO if {v} is None else {v}.bytes")
    elif kafka_type not in VARIABLE_TYPES:
        raise NotImplementedError(f"no writer for kafka type {kafka_type!r}")
    elif flexible:  # compact: uvarint length + 1, 0 for null; str or bytes alike
        s = _local(block, expr, "s")
        body = block
        if nullable:
            block.write(f"if {s} is None: {out} += b'\\x00'")
            body = block.nested("else:")
        body.line(f"if isinstance({s}, str): {s} = {s}.encode()")
        body.write(f"{out} += _UV[len({s}) + 1]")
        body.write(f"{out} += {s}")
        if nullable:
            body.close()
    else:  # legacy: int16 length for a string, int32 for bytes; -1 for null
        code = "h" if kafka_type == "string" else "i"
        encode = ".encode()" if kafka_type == "string" else ""
        s = block.gen.name("s")
        if nullable:
            block.line(f"{s} = {expr}")
            if encode:
                block.line(f"if {s} is not None: {s} = {s}{encode}")
            block.fixed(code, f"-1 if {s} is None else len({s})")
            block.write(f"if {s} is not None: {out} += {s}")
        else:
            block.line(f"{s} = {expr}{encode}")
            block.fixed(code, f"len({s})")
            block.write(f"{out} += {s}")


def _array(block: _Block, element: Any, kafka_type: str, expr: str, flexible: bool) -> None:
    out = block.out
    a = _local(block, expr, "a")
    inner, _nullable = strip_optional(element)
    fixed = _FIXED.get(kafka_type)
    if fixed is not None and fixed[1] == "{}" and not is_entity(inner):
        # Plain numbers: the whole array in one pack by a packer per element count,
        # the count (a compact array's varint, a legacy array's int32) included.
        packers = block.gen.constant(_ArrayPackers(fixed[0], flexible), "_A")
        null = "b'\\x00'" if flexible else "b'\\xff\\xff\\xff\\xff'"
        block.write(f"if {a} is None: {out} += {null}")
        block.nested("else:").write(f"{out} += {packers}[len({a})](*{a})")
        return
    if flexible:
        block.write(f"if {a} is None: {out} += b'\\x00'")
        body = block.nested("else:")
        body.write(f"{out} += _UV[len({a}) + 1]")
    else:
        block.fixed("i", f"-1 if {a} is None else len({a})")
        body = block.nested(f"if {a} is not None:")
    e = block.gen.name("e")
    loop = body.nested(f"for {e} in {a}:")
    if is_entity(inner):
        _entity(loop, inner, e)
    else:  # a primitive element is never null (uuid aside, which writes zeros)
        _scalar(loop, kafka_type, e, flexible, nullable=False)
    loop.close()
    body.close()


def _field(
    block: _Block,
    owner: type,
    field: dataclasses.Field[Any],
    expr: str,
    is_tag: bool,
) -> None:
    flexible: bool = owner.__flexible__  # type: ignore[attr-defined]
    tp, nullable = strip_optional(field.type)
    # A tagged field is optional by its tag's presence: kio writes it non-nullable.
    nullable = nullable and not is_tag
    kafka_type: str = field.metadata.get("kafka_type", "")
    if owner.__name__ == "RequestHeader" and field.name == "client_id":
        # Kafka's one exception: a legacy string even in flexible header versions.
        _scalar(block, "string", expr, flexible=False, nullable=True)
    elif typing.get_origin(tp) is tuple:
        _array(block, typing.get_args(tp)[0], kafka_type, expr, flexible)
    elif is_entity(tp):
        if nullable:  # KIP-893: int8 marker, -1 null, 1 present
            v = _local(block, expr)
            block.write(f"if {v} is None: {block.out} += b'\\xff'")
            body = block.nested("else:")
            body.fixed("b", "1")
            _entity(body, tp, v)
            body.close()
        else:
            _entity(block, tp, _local(block, expr))
    else:
        _scalar(block, kafka_type, expr, flexible, nullable)


def _entity(block: _Block, cls: type, obj: str) -> None:
    """Append the code writing ``obj`` (a local name), an instance of ``cls``."""
    flexible: bool = getattr(cls, "__flexible__", False)
    tagged: list[tuple[int, dataclasses.Field[Any]]] = []
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged.append((int(tag), field))
        else:
            _field(block, cls, field, f"{obj}.{field.name}", is_tag=False)
    if tagged and not flexible:
        raise ValueError(f"{cls.__qualname__}: tagged fields on a non-flexible model")
    if not flexible:
        return
    if not tagged:
        block.fixed("x", None)  # the tagged-field count, 0
        return
    tagged.sort(key=lambda item: item[0])
    gen = block.gen
    present: list[tuple[int, dataclasses.Field[Any], str, str]] = []
    for tag, field in tagged:
        # kio leaves a field out when it equals its default (else its implicit default).
        default = gen.constant(get_tagged_field_default(field), "_D")
        v = gen.name("v")
        p = gen.name("p")
        block.line(f"{v} = {obj}.{field.name}")
        block.line(f"{p} = not ({v} is {default} or {v} == {default})")
        present.append((tag, field, v, p))
    count = gen.name("n")
    block.line(f"{count} = {' + '.join(p for _, _, _, p in present)}")
    body = block.nested(f"if {count}:")
    body.write(f"{block.out} += _UV[{count}]")
    for tag, field, v, p in present:
        t = gen.name("t")
        value = body.nested(f"if {p}:", out=t)
        value.line(f"{t} = bytearray()")
        _field(value, cls, field, v, is_tag=True)
        value.flush()
        value.line(f"{block.out} += _UV[{tag}]")
        value.line(f"{block.out} += _UV[len({t})]")
        value.line(f"{block.out} += {t}")
    body.close()
    block.nested("else:").line(f"{block.out} += b'\\x00'")


_generated: dict[type, tuple[str, dict[str, Any]]] = {}
_writers: dict[type, Callable[[bytearray, Any], None]] = {}


def _generate(cls: type) -> tuple[str, dict[str, Any]]:
    generated = _generated.get(cls)
    if generated is None:
        gen = _Gen()
        gen.lines.append("def write(out, o):")
        body = _Block(gen, "out", 1)
        _entity(body, cls, "o")
        body.close()
        generated = _generated[cls] = ("\n".join(gen.lines) + "\n", gen.namespace)
    return generated


def writer_source(cls: type) -> str:
    """The generated source of ``cls``'s writer (a function ``write(out, o)``)."""
    return _generate(cls)[0]


def writer_for(cls: type[E]) -> FastWriter[E]:
    """The compiled writer of ``cls`` (generated and compiled on first use)."""
    writer = _writers.get(cls)
    if writer is None:
        source, constants = _generate(cls)
        filename = f"<fast writer {cls.__module__}.{cls.__qualname__}>"
        writer = _writers[cls] = load_source(source, filename, constants)["write"]
    return writer


def encode(entity: object) -> bytes:
    """The encoding of one kio entity (no header, no length prefix)."""
    out = bytearray()
    writer_for(type(entity))(out, entity)
    return bytes(out)
