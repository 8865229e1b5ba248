"""Straight-line Python source for one coordinator schema version, compiled once.

``record_schema.Schema.codec`` hands the declared fields of one (schema, version) here;
:func:`generate` writes the source of three functions -- ``encode(out, v)``,
``framed(head, v)`` (the int16 ``head`` then the struct, as bytes: a record's key or
value) and ``decode(data, pos)`` -- with every nested struct inlined and a loop per
array, and :func:`compile_codec` compiles it (as ``protocol.fast_writers`` does for
kio's messages). Per-field closures cost a Python call per field and a dict lookup per
value; here a field is one expression.

What the generated code does:

- runs of fixed-width values are packed, or unpacked, by one precompiled
  ``struct.Struct``: ints, uuids (``16s``), legacy string, bytes and array lengths and,
  in a flexible version, the first byte of a compact length or of a tagged-field count
  (a decoder reads a longer varint again with ``protocol.varint`` when that byte says
  more follow; a first byte with no run to join is read by indexing). A run ends where
  a variable-length value starts (a decoder needs the length before it reads on) or at
  a loop;
- arrays of ints are packed, or unpacked, whole by a ``struct.Struct`` per length;
- ``framed`` of a struct with no loop and no tagged field (every key, an offset commit)
  returns one concatenation of its pieces; the others append to a ``bytearray``;
- a decoder builds each struct as one dict literal (fields a version lacks and tagged
  fields hold their defaults) or, for a struct declared with a ``make``, one call of it
  (by position when its parameters are the fields in order, else by keyword; arrays
  as tuples; its encoder reads attributes); when a flexible struct's tagged-field
  count is not 0, it reads the tagged fields it knows (each by a generated function
  of its own, on the bytes up to the field's end) and skips the others. The UUIDs it
  reads come from a bounded table (:data:`UUIDS`): the same topic ids recur in every
  record of a load.

The bytes are those of the closures this replaced (``tests/unit/test_coordinator_records.py``
pins them against the hand-written codecs before those; ``tests/unit/test_record_codegen.py``
against a plain reference encoder for drawn values). A truncated record, or a null
where none is allowed, raises ``struct.error`` or ``ValueError`` (an ``IndexError`` of a
byte read past the end is turned into a ``ValueError``), as before; where a truncation
is found may differ (a ``struct.error`` of a merged run rather than a varint's
``ValueError``): every caller catches both.
"""

from __future__ import annotations

import functools
import inspect
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.coordinator.record_fields import FIXED_CODES, Field, Struct
from protocol.source_gen import SourceGen, load_source
from protocol.varint import UVARINT, read_uvarint

__all__ = ("Compiled", "compile_codec", "generate")

Values = dict[str, Any]
TagDecoder = Callable[[bytes, int], tuple[Any, int]]
_INLINE = (type(None), bool, int, str)  # defaults written as literals


@dataclass(frozen=True)
class Compiled:
    """The generated functions of one (schema, version) and their source."""

    encode: Callable[[bytearray, Any], None]
    framed: Callable[[int, Any], bytes]
    decode: Callable[[bytes, int], tuple[Any, int]]
    source: str


# ------------------------------------------------------------ runtime helpers
def _uv(data: bytes, pos: int) -> tuple[int, int]:
    return read_uvarint(data, pos, ValueError)


def _read_tagged(
    data: bytes, pos: int, values: Values, tags: dict[int, tuple[str, TagDecoder]]
) -> int:
    """The tagged-field section at ``pos`` (its count first): known tags into ``values``,
    the others skipped. The slow path: most structs have none."""
    count, pos = _uv(data, pos)
    for _ in range(count):
        tag, pos = _uv(data, pos)
        size, pos = _uv(data, pos)
        end = pos + size
        if end > len(data):
            raise ValueError("truncated tagged field")
        known = tags.get(tag)
        if known is not None:
            name, dec = known
            values[name], after = dec(data[:end], pos)
            if after != end:
                raise ValueError(f"bad size of tagged field {name}")
        pos = end
    return pos


class _UuidCache(dict[bytes, uuid.UUID]):
    """``UUIDS[raw]``: the UUID of 16 bytes. A coordinator's records name the same few
    topics over and over, and ``uuid.UUID(bytes=...)`` costs more than the rest of a
    key: the UUIDs made are kept (they are immutable), up to ``limit`` of them."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __missing__(self, raw: bytes) -> uuid.UUID:
        made = uuid.UUID(bytes=raw)
        if len(self) < self.limit:
            self[raw] = made
        return made


UUIDS = _UuidCache(4096)


class _ArrayPackers(dict[int, Callable[..., bytes]]):
    """``packers[n](*items)``: an int array of ``n`` items, its count first (int32, or a
    compact count); made on first use, kept for counts up to 256."""

    def __init__(self, code: str, compact: bool) -> None:
        super().__init__()
        self.code, self.compact = code, compact

    def __missing__(self, count: int) -> Callable[..., bytes]:
        packer: Callable[..., bytes]
        if not self.compact or count < 127:  # the count fits a struct code: one pack
            pack = struct.Struct(f">{'B' if self.compact else 'i'}{count}{self.code}").pack
            packer = functools.partial(pack, count + 1 if self.compact else count)
        else:
            prefix = UVARINT[count + 1]
            body = struct.Struct(f">{count}{self.code}").pack

            def packer(*items: Any) -> bytes:
                return prefix + body(*items)

        if count <= 256:
            self[count] = packer
        return packer


class _ArrayUnpackers(dict[int, Callable[[bytes, int], tuple[Any, ...]]]):
    """``unpackers[n](data, pos)``: ``n`` ints of one code; kept for counts up to 256."""

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code

    def __missing__(self, count: int) -> Callable[[bytes, int], tuple[Any, ...]]:
        unpack = struct.Struct(f">{count}{self.code}").unpack_from
        if count <= 256:
            self[count] = unpack
        return unpack


# ------------------------------------------------------------------- source
class _Source(SourceGen):
    """Lines of one module of generated functions, and (``SourceGen``) unique local names
    and the constants its namespace holds (packers, defaults, tag tables)."""

    def __init__(self) -> None:
        super().__init__(
            {"_UV": UVARINT, "_uv": _uv, "_UUIDS": UUIDS, "_read_tagged": _read_tagged}
        )
        self.lines: list[str] = []  # the function being written
        self.functions: list[str] = []  # the functions written, then the tag tables
        self.tail: list[str] = []  # tag tables, after the functions they name

    def literal(self, value: object) -> str:
        """A value as the generated code names it: a literal, else a constant."""
        if isinstance(value, _INLINE):
            return repr(value)
        return self.constant(value, "_D")

    def packer(self, fmt: str, attr: str) -> str:
        return self.struct_method(fmt, attr)


class _Block:
    """Statements at one indentation level. Fixed-width values wait in ``pending``
    until a statement that needs them first (``flush``): one pack, or one unpack."""

    def __init__(self, src: _Source, indent: int, out: str = "out") -> None:
        self.src, self.indent, self.out = src, indent, out
        self.pending: list[tuple[str, str | None]] = []  # (struct code, value or target)
        self.start = len(src.lines)

    def line(self, text: str) -> None:
        self.src.lines.append("    " * self.indent + text)

    def statement(self, text: str) -> None:
        """A statement that needs the pending values done first."""
        self.flush()
        self.line(text)

    def nested(self, header: str, out: str | None = None) -> _Block:
        self.statement(header)
        return _Block(self.src, self.indent + 1, self.out if out is None else out)

    def close(self) -> None:
        self.flush()
        if len(self.src.lines) == self.start:
            self.line("pass")

    def flush(self) -> None:
        raise NotImplementedError


class _Writer(_Block):
    """A block of an encoder: pending values are packed onto ``out``.

    With ``parts`` (a struct without arrays or tagged fields: a key, an offset commit)
    nothing is appended: each piece is an expression kept in ``parts``, and the function
    returns their concatenation, which for a few short pieces costs half of a
    ``bytearray`` and its copy."""

    def __init__(
        self, src: _Source, indent: int, out: str = "out", parts: list[str] | None = None
    ) -> None:
        super().__init__(src, indent, out)
        self.parts = parts

    def fixed(self, code: str, value: str | None) -> None:
        self.pending.append((code, value))

    def emit(self, expr: str) -> None:
        """Append the bytes ``expr`` (after the pending values)."""
        self.flush()
        self._emit(expr)

    def _emit(self, expr: str) -> None:
        if self.parts is None:
            self.line(f"{self.out} += {expr}")
        else:
            self.parts.append(expr)

    def flush(self) -> None:
        if not self.pending:
            return
        fmt = ">" + "".join(code for code, _ in self.pending)
        args = [value for _, value in self.pending if value is not None]
        self.pending.clear()
        if args:
            self._emit(f"{self.src.packer(fmt, 'pack')}({', '.join(args)})")
        else:
            self._emit(self.src.constant(struct.pack(fmt), "_K"))

    def nested(self, header: str, out: str | None = None) -> _Writer:
        assert self.parts is None, "a concatenation has no branches"
        self.statement(header)
        return _Writer(self.src, self.indent + 1, self.out if out is None else out)

    def local(self, expr: str, prefix: str = "v") -> str:
        if expr.isidentifier():
            return expr
        name = self.src.name(prefix)
        self.line(f"{name} = {expr}")
        return name


class _Reader(_Block):
    """A block of a decoder: pending reads are unpacked from ``data`` at ``pos``."""

    def fixed(self, code: str) -> str:
        """The local that holds the value at the next ``code`` once flushed."""
        target = self.src.name("x")
        self.pending.append((code, target))
        return target

    def flush(self) -> None:
        if not self.pending:
            return
        fmt = ">" + "".join(code for code, _ in self.pending)
        targets = "".join(f"{target}, " for _, target in self.pending)
        self.pending.clear()
        self.line(f"{targets}= {self.src.packer(fmt, 'unpack_from')}(data, pos)")
        self.line(f"pos += {struct.calcsize(fmt)}")

    def nested(self, header: str, out: str | None = None) -> _Reader:
        self.statement(header)
        return _Reader(self.src, self.indent + 1)

    def first_byte(self) -> str:
        """The next byte (of a varint), read now: with the pending run when there is
        one, else by indexing (the function turns an IndexError into a ValueError)."""
        if self.pending:
            n = self.fixed("B")
            self.flush()
        else:
            n = self.src.name("x")
            self.line(f"{n} = data[pos]")
            self.line("pos += 1")
        return n

    def length(self, flexible: bool, code: str) -> str:
        """A string's, bytes' or array's length (-1 for null), read now."""
        if not flexible:
            n = self.fixed(code)
            self.flush()
            return n
        n = self.first_byte()  # a compact length: all of it unless its high bit is set
        self.line(f"if {n} > 127: {n}, pos = _uv(data, pos - 1)")
        self.line(f"{n} -= 1")
        return n


def _present(fields: tuple[Field, ...], version: int) -> list[Field]:
    return [f for f in fields if f.in_version(version)]


def _tagged(fields: tuple[Field, ...], version: int, flexible: bool) -> list[Field]:
    tagged = [f for f in _present(fields, version) if f.tag is not None and flexible]
    return sorted(tagged, key=lambda f: f.tag or 0)


# ------------------------------------------------------------------ encoding
def _write_struct(
    block: _Writer,
    fields: tuple[Field, ...],
    version: int,
    flexible: bool,
    obj: str,
    objects: bool = False,
) -> None:
    """Write the struct ``obj``: a dict, or an object (``objects``: its ``Struct.make``
    is set) whose fields are attributes."""

    def get(f: Field) -> str:
        return f"{obj}.{f.attribute}" if objects else f"{obj}[{f.name!r}]"

    for f in _present(fields, version):
        if f.tag is None and _is_nullable_struct(f, version):
            _write_nullable_struct(block, f, get(f), version, flexible)
        elif f.tag is None:
            _write_field(block, f, get(f), version, flexible)
    if not flexible:
        return
    tagged = _tagged(fields, version, flexible)
    if not tagged:
        block.fixed("x", None)  # no tagged fields: their count, 0
        return
    src = block.src
    values = []
    for f in tagged:
        value = src.name("t")
        block.line(f"{value} = {get(f) if objects else f'{obj}.get({f.name!r})'}")
        values.append(value)
    block.statement(f"{block.out} += _UV[{' + '.join(f'({v} is not None)' for v in values)}]")
    for f, value in zip(tagged, values, strict=True):
        body = src.name("b")
        present = block.nested(f"if {value} is not None:", out=body)
        present.line(f"{body} = bytearray()")
        _write_field(present, f, value, version, flexible)
        present.flush()
        present.line(f"{block.out} += _UV[{f.tag}]")
        present.line(f"{block.out} += _UV[len({body})]")
        present.line(f"{block.out} += {body}")


def _is_nullable_struct(f: Field, version: int) -> bool:
    return isinstance(f.type, Struct) and not f.array and f.nullable_in(version)


def _write_nullable_struct(
    block: _Writer, f: Field, expr: str, version: int, flexible: bool
) -> None:
    """A nullable struct that is not tagged: Kafka's int8 marker (-1 null, 1 present),
    then the struct."""
    value = block.local(expr, "n")
    block.fixed("b", f"-1 if {value} is None else 1")
    block.flush()
    present = block.nested(f"if {value} is not None:")
    _write_field(present, f, value, version, flexible)
    present.flush()


def _write_field(block: _Writer, f: Field, expr: str, version: int, flexible: bool) -> None:
    if isinstance(f.type, Struct):
        if f.array:
            _write_array(block, f.type, expr, version, flexible)
        else:
            objects = f.type.make is not None
            _write_struct(block, f.type.fields, version, flexible, block.local(expr), objects)
    elif f.type.startswith("[]"):
        _write_array(block, f.type[2:], expr, version, flexible)
    else:
        _write_primitive(block, f.type, expr, flexible)


def _write_primitive(block: _Writer, type_name: str, expr: str, flexible: bool) -> None:
    code = FIXED_CODES.get(type_name)
    if code is not None:
        block.fixed(code, expr)
    elif type_name == "uuid":
        block.fixed("16s", f"{expr}.bytes")
    elif type_name not in ("string", "bytes"):
        raise ValueError(f"unknown field type {type_name}")
    else:  # null is written as null whatever the schema allows, as Kafka's writers do
        src = block.src
        s, n = src.name("s"), src.name("n")
        encode = f"{s} = {s}.encode('utf-8'); " if type_name == "string" else ""
        block.line(f"{s} = {expr}")
        if flexible:
            block.line(f"if {s} is None: {n} = b'\\x00'; {s} = b''")
            block.line(f"else: {encode}{n} = _UV[len({s}) + 1]")
            block.emit(n)
        else:
            block.line(f"if {s} is None: {n} = -1; {s} = b''")
            block.line(f"else: {encode}{n} = len({s})")
            block.fixed("h" if type_name == "string" else "i", n)
        block.emit(s)


def _write_array(
    block: _Writer, item: str | Struct, expr: str, version: int, flexible: bool
) -> None:
    out = block.out
    a = block.local(expr, "a")
    code = FIXED_CODES.get(item) if isinstance(item, str) else None
    if code is not None:  # ints: count and items in one pack
        packers = block.src.constant(_ArrayPackers(code, flexible), "_A")
        null = "b'\\x00'" if flexible else "b'\\xff\\xff\\xff\\xff'"
        packed = block.src.name("p")
        block.line(f"{packed} = {null} if {a} is None else {packers}[len({a})](*{a})")
        block.emit(packed)
        return
    if flexible:
        block.statement(f"if {a} is None: {out} += b'\\x00'")
        body = block.nested("else:")
        body.line(f"{out} += _UV[len({a}) + 1]")
    else:
        block.fixed("i", f"-1 if {a} is None else len({a})")
        body = block.nested(f"if {a} is not None:")
    e = block.src.name("e")
    loop = body.nested(f"for {e} in {a}:")
    if isinstance(item, Struct):
        _write_struct(loop, item.fields, version, flexible, e, item.make is not None)
    else:
        _write_primitive(loop, item, e, flexible)
    loop.close()
    body.close()


def _branch_free(fields: tuple[Field, ...], version: int, flexible: bool) -> bool:
    """Whether a struct's encoding is a fixed sequence of pieces: no array of structs or
    strings (a loop), no tagged field (a branch)."""
    for f in _present(fields, version):
        if f.tag is not None and flexible:
            return False
        if isinstance(f.type, Struct):
            if f.array or not _branch_free(f.type.fields, version, flexible):
                return False
        elif f.type.startswith("[]") and f.type[2:] not in FIXED_CODES:
            return False
    return True


# ------------------------------------------------------------------ decoding
def _read_struct(
    block: _Reader,
    fields: tuple[Field, ...],
    version: int,
    flexible: bool,
    make: Callable[..., Any] | None = None,
) -> str:
    """Read a struct; returns the expression of its dict, or of ``make(...)`` when the
    struct is made into an object (valid once flushed)."""
    items = []
    for f in fields:
        if f.in_version(version) and f.tag is None:
            value = _read_field(block, f, version, flexible, tuples=make is not None)
        else:  # absent from this version, or tagged: the default until read
            value = block.src.literal(f.default)
        items.append((f.attribute if make else f.name, value))
    if make is None:
        literal = "{" + ", ".join(f"{key!r}: {value}" for key, value in items) + "}"
    else:
        maker = block.src.constant(make, "_M")
        if _positional(make, [key for key, _ in items]):
            literal = f"{maker}({', '.join(value for _, value in items)})"
        else:
            literal = f"{maker}({', '.join(f'{key}={value}' for key, value in items)})"
    if not flexible:
        return literal
    count = block.first_byte()  # the tagged fields' count: 0 unless some follow
    tagged = _tagged(fields, version, flexible)
    tags = _tag_table(block.src, tagged, version, flexible, make is not None)
    if tags is None:
        block.line(f"if {count}: pos = _read_tagged(data, pos - 1, {{}}, {{}})")
        return literal
    r = block.src.name("r")
    if make is None:
        block.line(f"{r} = {literal}")
        block.line(f"if {count}: pos = _read_tagged(data, pos - 1, {r}, {tags})")
        return r
    # An object is made once its tagged fields are read: they go to a dict first.
    block.line(f"{r} = {{{', '.join(f'{key!r}: {value}' for key, value in items)}}}")
    block.line(f"if {count}: pos = _read_tagged(data, pos - 1, {r}, {tags})")
    return f"{maker}(**{r})"


def _positional(make: Callable[..., Any], attributes: list[str]) -> bool:
    """Whether ``make`` takes ``attributes`` as its first positional parameters, in
    that order (a dataclass whose fields are declared as the schema's are): a call by
    position costs a frozen dataclass a fifth less than one by keyword."""
    try:
        parameters = list(inspect.signature(make).parameters.values())
    except (TypeError, ValueError):  # no signature to read: call by keyword
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    leading = [p.name for p in parameters[: len(attributes)] if p.kind in kinds]
    rest = parameters[len(attributes) :]
    return leading == attributes and all(p.default is not p.empty for p in rest)


def _tag_table(
    src: _Source, tagged: list[Field], version: int, flexible: bool, objects: bool
) -> str | None:
    """The name of a ``{tag: (field name, decoder)}`` table, each decoder a generated
    function of its own (None without tagged fields); in an object struct (``objects``)
    the field's attribute name, and its arrays read as tuples."""
    if not tagged:
        return None
    entries = []
    for f in tagged:
        function = src.name("_tag")
        read = functools.partial(
            _read_field, f=f, version=version, flexible=flexible, tuples=objects
        )
        _function(src, f"def {function}(data, pos):", read)
        entries.append(f"{f.tag}: ({(f.attribute if objects else f.name)!r}, {function})")
    table = src.name("_TAGS")
    src.tail.append(f"{table} = {{{', '.join(entries)}}}")
    return table


def _read_field(
    block: _Reader, f: Field, version: int, flexible: bool, tuples: bool = False
) -> str:
    """Read one field; an array as a tuple when ``tuples`` (a field of an object)."""
    nullable = f.nullable_in(version)
    if isinstance(f.type, Struct):
        if not f.array and nullable and f.tag is None:
            marker = block.fixed("b")
            block.flush()
            target = block.src.name("s")
            block.line(f"if {marker} < 0: {target} = None")
            body = block.nested("else:")
            value = _read_struct(body, f.type.fields, version, flexible, f.type.make)
            body.statement(f"{target} = {value}")
            return target
        if not f.array:
            return _read_struct(block, f.type.fields, version, flexible, f.type.make)
        return _read_array(block, f.name, f.type, version, flexible, nullable, tuples)
    if f.type.startswith("[]"):
        return _read_array(block, f.name, f.type[2:], version, flexible, nullable, tuples)
    return _read_primitive(block, f.type, flexible, nullable)


def _read_primitive(block: _Reader, type_name: str, flexible: bool, nullable: bool) -> str:
    code = FIXED_CODES.get(type_name)
    if code is not None:
        return block.fixed(code)
    if type_name == "uuid":
        return f"_UUIDS[{block.fixed('16s')}]"
    if type_name not in ("string", "bytes"):
        raise ValueError(f"unknown field type {type_name}")
    is_string = type_name == "string"
    n = block.length(flexible, "h" if is_string else "i")
    s = block.src.name("s")
    if nullable or not is_string:  # a null non-nullable bytes reads as empty
        block.line(f"if {n} < 0: {s} = {'None' if nullable else repr(b'')}")
        body = block.nested("else:")
    else:
        block.line(f"if {n} < 0: raise ValueError('null where a string is required')")
        body = block
    body.line(f"{s} = data[pos:pos + {n}]")
    body.line(f"pos += {n}")
    body.line("if pos > _len: raise ValueError('truncated record')")
    body.line(f"{s} = {s}.decode('utf-8')" if is_string else f"{s} = bytes({s})")
    return s


def _read_array(
    block: _Reader,
    name: str,
    item: str | Struct,
    version: int,
    flexible: bool,
    nullable: bool,
    as_tuple: bool,
) -> str:
    n = block.length(flexible, "i")
    a = block.src.name("a")
    if nullable:
        block.line(f"if {n} < 0: {a} = None")
        body = block.nested("else:")
    else:
        block.line(f"if {n} < 0: raise ValueError({f'null where an array is required ({name})'!r})")
        body = block
    body.line(f"if {n} > _len - pos: raise ValueError({f'array {name} longer than the record'!r})")
    code = FIXED_CODES.get(item) if isinstance(item, str) else None
    if code is not None:  # ints: all of them in one unpack
        unpackers = block.src.constant(_ArrayUnpackers(code), "_A")
        unpacked = f"{unpackers}[{n}](data, pos)"
        body.line(f"{a} = {unpacked}" if as_tuple else f"{a} = list({unpacked})")
        body.line(f"pos += {n} * {struct.calcsize('>' + code)}")
        return a
    body.line(f"{a} = []")
    loop = body.nested(f"for _ in range({n}):")
    if isinstance(item, Struct):
        value = _read_struct(loop, item.fields, version, flexible, item.make)
    else:
        value = _read_primitive(loop, item, flexible, nullable=False)
    loop.statement(f"{a}.append({value})")
    if as_tuple:
        body.line(f"{a} = tuple({a})")
    return a


def _function(src: _Source, header: str, read: Callable[[_Reader], str]) -> None:
    """A decoding function ``header``: its body reads one value and returns it with
    the position after it."""
    outer, src.lines = src.lines, [header, "    _len = len(data)", "    try:"]
    body = _Reader(src, 2)
    value = read(body)
    body.statement(f"return {value}, pos")
    src.lines.append("    except IndexError:")  # a byte read past the end
    src.lines.append("        raise ValueError('truncated record') from None")
    src.functions.append("\n".join(src.lines))
    src.lines = outer


# ------------------------------------------------------------------ compiling
def generate(
    fields: tuple[Field, ...],
    version: int,
    flexible: bool,
    make: Callable[..., Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The source of ``encode``, ``framed`` and ``decode`` of one struct version, and
    the constants it names; ``make`` as :attr:`Struct.make` (values are objects)."""
    src = _Source()
    src.lines = ["def encode(out, v):"]
    encode = _Writer(src, 1)
    _write_struct(encode, fields, version, flexible, "v", make is not None)
    encode.close()
    src.lines.append("def framed(head, v):")
    _write_framed(src, fields, version, flexible, make is not None)
    src.functions.append("\n".join(src.lines))
    read = functools.partial(
        _read_struct, fields=fields, version=version, flexible=flexible, make=make
    )
    _function(src, "def decode(data, pos):", read)
    return "\n".join([*src.functions, *src.tail]) + "\n", src.namespace


def _write_framed(
    src: _Source, fields: tuple[Field, ...], version: int, flexible: bool, objects: bool
) -> None:
    """The body of ``framed(head, v)``: a concatenation when the struct allows one."""
    parts: list[str] | None = [] if _branch_free(fields, version, flexible) else None
    framed = _Writer(src, 1, parts=parts)
    if parts is None:
        framed.line("out = bytearray()")
    framed.fixed("h", "head")
    _write_struct(framed, fields, version, flexible, "v", objects)
    framed.flush()
    if parts is None:
        framed.line("return bytes(out)")
    elif len(parts) <= 4:
        framed.line(f"return {' + '.join(parts)}")
    else:
        framed.line(f"return b''.join(({', '.join(parts)}))")


def compile_codec(
    name: str,
    fields: tuple[Field, ...],
    version: int,
    flexible: bool,
    make: Callable[..., Any] | None = None,
) -> Compiled:
    """Generate and compile one struct version (``name`` labels its tracebacks)."""
    source, constants = generate(fields, version, flexible, make)
    namespace = load_source(source, f"<coordinator record {name} v{version}>", constants)
    return Compiled(namespace["encode"], namespace["framed"], namespace["decode"], source)
