"""Body guards: the checks a body passes before kio's native reader sees it.

kio's native reader sizes each array's storage from the count on the wire *before*
reading an element (8 bytes per element). A 15-byte request claiming 2**32 elements in
a compact array makes it request 32 GiB, and Rust aborts the whole process when an
allocation fails -- no exception, the broker is gone. (Legacy int32 arrays do the same
up to 16 GiB, fatal under a memory limit.) So before kio sees a body, a guard compiled
from the same schema checks that every array count fits in the bytes left: each element
takes at least its minimum encoded size (one byte for the smallest), so a larger count
is malformed anyway. It reads only lengths and counts; fixed-width fields are skipped in
merged runs. Strings and bytes need no such care: kio checks their length against the
buffer before it copies (and refuses a null where the schema has none), and the guard's
final "body needs N bytes" check catches them too. Known tagged fields are walked as
well and must fill exactly the size their tag gives.

Kafka 4.4's decoder limits. Kafka's readers refuse an array of more than
``MAX_ARRAY_ELEMENTS`` (1,000,000) elements and a tagged-field section of more than
``MAX_TAGGED_FIELDS`` (10,000) fields before they allocate anything, whatever the frame's
size, so that a large frame (``socket.request.max.bytes`` is 100 MiB) cannot claim a
hundred million one-byte elements either. The guard refuses the same counts, as the
first thing it does with them: so the storage kio reserves for an array (8 bytes per
element, sized from the count) is at most 8 MB, and never more than the frame's bytes
allow. A refused body is a malformed request, and Kafka closes the connection on one
(``RequestContext.parseRequest``'s InvalidRequestException); the dispatcher does the same.

Null arrays. kio reads an array count of -1 as ``None`` whatever the schema says, so a
peer could hand a handler ``topic_data=None`` where Kafka's schema has no
``nullableVersions``. Kafka's generated readers refuse that ("non-nullable field ... was
serialized as null"); so does the guard. kio's classes carry the schema's nullability
per version in their type hints: ``tuple[X, ...] | None`` is nullable (Metadata v1+
``topics``), ``tuple[X, ...]`` is not (Metadata v0). The check costs nothing on the path
the guard takes anyway (a count of zero or less).

How. As ``fast_writers`` does for encoders, each class gets, on first use, the source of
one straight-line function ``guard(b, p) -> end`` -- nested structs inlined, a loop per
array of variable-size elements, one multiplication for an array of fixed-width ones
(numbers, or structs of numbers only), one addition per run of fixed-width fields
(across struct boundaries, folded into the offset of the next read), a one-byte varint
read inline (two bytes too for bytes and records; a helper beyond) -- compiled once and
cached by class. ``guard_source(cls)`` shows the text.

Errors. Counts that cannot fit, nulls and negative counts, and tagged fields that do
not fill their size raise with a message naming the field. A read past the end of the
frame raises plain ``IndexError`` / ``struct.error`` (no check on the common path); the
line of the generated code it came from names the field it reads (each line has a
label), so ``check_body`` still says where: "frame ends at or before X" (at: in X's
length or count; before: in the fixed-width fields folded into that read).
"""

from __future__ import annotations

import dataclasses
import functools
import linecache
import struct
import typing
from collections.abc import Callable
from typing import Any, Final

from protocol.fast_writers import VARIABLE_TYPES, is_entity, strip_optional
from protocol.varint import read_uvarint

__all__ = (
    "FIXED_WIDTH",
    "MAX_ARRAY_ELEMENTS",
    "MAX_TAGGED_FIELDS",
    "BodyGuard",
    "check_body",
    "guard_for",
    "guard_source",
    "read_uvarint",
)

BodyGuard = Callable[[bytes | memoryview, int], int]
"""``guard(buf, offset) -> end``: walks one body or raises."""

_FILENAME_PREFIX: Final = "<body guard "
#: Kafka 4.4's limits on what one count on the wire may claim.
MAX_ARRAY_ELEMENTS: Final = 1_000_000
MAX_TAGGED_FIELDS: Final = 10_000


class _Bad(Exception):
    """A refusal whose message is complete (it names the field)."""


class _Short(Exception):
    """A refusal raised by a helper: ``check_body`` adds where it happened."""


#: The bytes each fixed-width Kafka type takes on the wire, by kio's type name.
FIXED_WIDTH: Final[dict[str, int]] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


# --------------------------------------------------------------------------- helpers
# What the generated code calls off its common path.


# The generated code's name for it: a truncated or overlong varint is a short body.
_uv = functools.partial(read_uvarint, error=_Short)


def _compact_bytes(buf: bytes | memoryview, pos: int) -> int:
    """Step over a compact string or bytes whose length takes more than one byte."""
    size, pos = _uv(buf, pos)
    return pos + size - 1 if size else pos  # 0 is null


def _unknown_tags(buf: bytes | memoryview, pos: int) -> int:
    """Step over a non-empty tagged-field section of a struct with no known tags."""
    count, pos = _uv(buf, pos)
    if count > MAX_TAGGED_FIELDS:
        raise _Bad(_too_many_tags("a struct", count))
    end = len(buf)
    for _ in range(count):
        _tag, pos = _uv(buf, pos)
        size, pos = _uv(buf, pos)
        pos += size
        if pos > end:
            raise _Short("truncated tagged field")
    return pos


def _fit(name: str, count: int, left: int) -> str:
    return f"array {name} of {count} elements cannot fit in the {max(left, 0)} bytes left"


def _over_limit(name: str, count: int) -> str:
    return f"array {name} of {count} elements is over the limit of {MAX_ARRAY_ELEMENTS}"


def _too_many_tags(owner: str, count: int) -> str:
    return f"{count} tagged fields in {owner} are over the limit of {MAX_TAGGED_FIELDS}"


def check_tagged_field_count(count: int, owner: str, error: type[Exception]) -> None:
    """Kafka 4.4's limit on one tagged-field section, for readers outside the guard (the
    request header's section): raises ``error``."""
    if count > MAX_TAGGED_FIELDS:
        raise error(_too_many_tags(owner, count))


def _negative(name: str, count: int) -> str:
    if count == -1:
        return f"non-nullable array {name} is null"
    return f"negative array length {count} for {name}"


_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from

_HELPERS: Final[dict[str, object]] = {
    "_Bad": _Bad,
    "_uv": _uv,
    "_cbytes": _compact_bytes,
    "_tags": _unknown_tags,
    "_over": _over_limit,
    "_many_tags": _too_many_tags,
    "_fit": _fit,
    "_neg": _negative,
    "_I16": _I16,
    "_I32": _I32,
}


# --------------------------------------------------------------------------- schema


def _scalar_width(kafka_type: str) -> int | None:
    """The width of a fixed-width scalar; None for a string, bytes or records."""
    width = FIXED_WIDTH.get(kafka_type)
    if width is None and kafka_type not in VARIABLE_TYPES:  # pragma: no cover - kio invariant
        raise TypeError(f"no guard for kafka type {kafka_type!r}")
    return width


def _scalar_min(kafka_type: str, flexible: bool) -> int:
    """The fewest bytes a scalar takes: its width, or its length's."""
    width = _scalar_width(kafka_type)
    if width is not None:
        return width
    return 1 if flexible else 2 if kafka_type == "string" else 4


def _fixed_size(cls: type) -> int | None:
    """The encoded size of ``cls`` when every instance has the same one, else None:
    a non-flexible struct of fixed-width scalars and such structs."""
    if getattr(cls, "__flexible__", False):
        return None  # its tagged-field section varies
    total = 0
    for field in dataclasses.fields(cls):
        tp, nullable = strip_optional(field.type)
        if typing.get_origin(tp) is tuple:
            return None
        if is_entity(tp):
            inner = None if nullable else _fixed_size(tp)
        else:
            inner = _scalar_width(field.metadata.get("kafka_type", ""))
        if inner is None:
            return None
        total += inner
    return total


def _min_size(cls: type) -> int:
    """The fewest bytes an instance of ``cls`` takes on the wire."""
    flexible: bool = getattr(cls, "__flexible__", False)
    total = 1 if flexible else 0  # the tagged-field count
    for field in dataclasses.fields(cls):
        if "tag" in field.metadata:
            continue
        tp, nullable = strip_optional(field.type)
        if typing.get_origin(tp) is tuple:
            total += 1 if flexible else 4
        elif is_entity(tp):
            total += 1 if nullable else _min_size(tp)
        else:
            total += _scalar_min(field.metadata.get("kafka_type", ""), flexible)
    return total


# --------------------------------------------------------------------------- generator


class _Gen:
    """The source of one guard: its lines, a label per line (the field it reads, for
    error messages), unique local names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.where: list[str] = []
        self.uses_len = False
        self._count = 0

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"


class _Block:
    """Statements at one indentation level. Fixed-width fields only add to ``pending``,
    the bytes to step over before the next read; a read folds them into its offset."""

    def __init__(self, gen: _Gen, indent: int) -> None:
        self.gen = gen
        self.indent = indent
        self.pending = 0
        self.start = len(gen.lines)

    def line(self, text: str, where: str) -> None:
        self.gen.lines.append("    " * self.indent + text)
        self.gen.where.append(where)

    def at(self) -> tuple[str, int]:
        """The offset expression of the next read, and the bytes it folds in (which
        the caller must add to ``p`` on every branch)."""
        skip, self.pending = self.pending, 0
        return (f"p + {skip}" if skip else "p"), skip

    def flush(self, where: str) -> None:
        if self.pending:
            self.line(f"p += {self.pending}", where)
            self.pending = 0

    def nested(self, header: str, where: str) -> _Block:
        """``header`` (an ``if``/``for``/``else`` line, after any pending step) and
        its body."""
        self.flush(where)
        self.line(header, where)
        return _Block(self.gen, self.indent + 1)

    def close(self, where: str) -> None:
        self.flush(where)
        if len(self.gen.lines) == self.start:
            self.line("pass", where)


def _plus(skip: int, expr: str) -> str:
    return f"{expr} + {skip}" if skip else expr


def _string(block: _Block, kafka_type: str, flexible: bool, where: str) -> None:
    """Step over a string, bytes or records (null included)."""
    at, skip = block.at()
    if flexible:  # uvarint length + 1, 0 for null
        block.line(f"x = b[{at}]", where)
        block.line(f"if x < 128: p += {_plus(skip, '(x or 1)')}", where)
        if kafka_type != "string":  # records and bytes often take two length bytes
            second = f"b[p + {skip + 1}]"
            # (A two-byte 0 is a non-canonical null: two bytes, nothing after them.)
            value = f"((x & 127 | {second} << 7) or 1)"
            block.line(f"elif {second} < 128: p += {value} + {skip + 1}", where)
        block.line(f"else: p = _cbytes(b, {at})", where)
    else:  # int16 length for a string, int32 for bytes; negative for null
        reader, width = ("_I16", 2) if kafka_type == "string" else ("_I32", 4)
        block.line(f"x = {reader}(b, {at})[0]", where)
        block.line(f"p += x + {skip + width} if x > 0 else {skip + width}", where)


def _count(block: _Block, flexible: bool, where: str) -> None:
    """Read an array count into ``x``: the uvarint (count + 1) of a compact array, the
    int32 of a legacy one."""
    at, skip = block.at()
    if flexible:
        block.line(f"x = b[{at}]", where)
        block.line(f"if x < 128: p += {skip + 1}", where)
        block.line(f"else: x, p = _uv(b, {at})", where)
    else:
        block.line(f"x = _I32(b, {at})[0]", where)
        block.line(f"p += {skip + 4}", where)


def _array(
    block: _Block, element: Any, kafka_type: str, flexible: bool, nullable: bool, name: str
) -> None:
    gen = block.gen
    gen.uses_len = True
    _count(block, flexible, name)
    inner, _ = strip_optional(element)
    if is_entity(inner):
        width, least = _fixed_size(inner), _min_size(inner)
    else:
        width, least = _scalar_width(kafka_type), _scalar_min(kafka_type, flexible)
    # An element of no bytes at all exists in no Kafka schema; counting it as one byte
    # keeps the bound (and the walk) finite if one ever appears.
    least = max(least, 1)
    body = block.nested("if x > 1:" if flexible else "if x > 0:", name)
    if flexible:
        body.line("x -= 1", name)
    label = repr(name)
    body.line(f"if x > {MAX_ARRAY_ELEMENTS}: raise _Bad(_over({label}, x))", name)
    if width:  # every element has the same size: one step
        body.line(f"p += x * {width}" if width > 1 else "p += x", name)
        body.line(f"if p > n: raise _Bad(_fit({label}, x, n - p + x * {width}))", name)
    else:
        need = f"x * {least}" if least > 1 else "x"
        body.line(f"if {need} > n - p: raise _Bad(_fit({label}, x, n - p))", name)
        loop = body.nested("for _ in range(x):", name)
        if is_entity(inner):
            _entity(loop, inner)
        else:
            _string(loop, kafka_type, flexible, name)
        loop.close(name)
    body.close(name)
    if flexible and not nullable:  # 0 is null
        block.line(f"elif not x: raise _Bad({_negative(name, -1)!r})", name)
    elif not flexible:
        if nullable:
            block.line(f"elif x < -1: raise _Bad(_neg({label}, x))", name)
        else:
            block.line(f"elif x < 0: raise _Bad(_neg({label}, x))", name)


def _field(block: _Block, owner: type, field: dataclasses.Field[Any], is_tag: bool) -> None:
    flexible: bool = getattr(owner, "__flexible__", False)
    tp, nullable = strip_optional(field.type)
    kafka_type: str = field.metadata.get("kafka_type", "")
    name = f"{owner.__qualname__}.{field.name}"
    if typing.get_origin(tp) is tuple:
        _array(block, typing.get_args(tp)[0], kafka_type, flexible, nullable, name)
    elif is_entity(tp):
        # Tagged structs carry no null marker: presence is the tag itself.
        if nullable and not is_tag:  # KIP-893: int8 marker, negative for null
            at, skip = block.at()
            block.line(f"x = b[{at}]", name)
            block.line(f"p += {skip + 1}", name)
            body = block.nested("if x < 128:", name)
            _entity(body, tp)
            body.close(name)
        else:
            _entity(block, tp)
    else:
        width = _scalar_width(kafka_type)
        if width is not None:
            block.pending += width
        else:
            _string(block, kafka_type, flexible, name)


def _entity(block: _Block, cls: type) -> None:
    """Append the code stepping over one ``cls`` at ``p``."""
    flexible: bool = getattr(cls, "__flexible__", False)
    tagged: list[tuple[int, dataclasses.Field[Any]]] = []
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged.append((int(tag), field))
        else:
            _field(block, cls, field, is_tag=False)
    if not flexible:
        return
    where = f"{cls.__qualname__}'s tagged fields"
    at, skip = block.at()
    if not tagged:
        block.line(f"if b[{at}]: p = _tags(b, {at})", where)
        block.line(f"else: p += {skip + 1}", where)
        return
    gen = block.gen
    gen.uses_len = True
    tag, size, end = gen.name("t"), gen.name("s"), gen.name("e")
    section = block.nested(f"if b[{at}]:", where)
    section.line(f"x, p = _uv(b, {at})", where)
    section.line(
        f"if x > {MAX_TAGGED_FIELDS}: raise _Bad(_many_tags({cls.__qualname__!r}, x))", where
    )
    loop = section.nested("for _ in range(x):", where)
    loop.line(f"{tag}, p = _uv(b, p)", where)
    loop.line(f"{size}, p = _uv(b, p)", where)
    loop.line(f"{end} = p + {size}", where)
    owner = cls.__qualname__
    loop.line(f"if {end} > n: raise _Bad(f'truncated tagged field {{{tag}}} of {owner}')", where)
    keyword = "if"
    for number, field in sorted(tagged, key=lambda item: item[0]):
        value = loop.nested(f"{keyword} {tag} == {number}:", where)
        _field(value, cls, field, is_tag=True)
        value.flush(where)
        value.line(
            f"if p != {end}: raise _Bad(f'tagged field {number} of {owner} "
            f"does not fill its {{{size}}} bytes')",
            where,
        )
        keyword = "elif"
    loop.line(f"p = {end}", where)
    block.line("else:", where)
    block.line(f"    p += {skip + 1}", where)


_generated: dict[type, tuple[str, tuple[str, ...]]] = {}
_labels: dict[str, tuple[str, ...]] = {}  # filename -> label per line


def _generate(cls: type) -> tuple[str, tuple[str, ...]]:
    generated = _generated.get(cls)
    if generated is None:
        gen = _Gen()
        body = _Block(gen, 1)
        _entity(body, cls)
        tail = _plus(body.pending, "p")
        lines = ["def guard(b, p):"]
        where = [cls.__qualname__]
        if gen.uses_len:
            lines.append("    n = len(b)")
            where.append(cls.__qualname__)
        lines += [*gen.lines, f"    return {tail}"]
        where += [*gen.where, cls.__qualname__]
        generated = _generated[cls] = ("\n".join(lines) + "\n", tuple(where))
    return generated


def guard_source(cls: type) -> str:
    """The generated source of ``cls``'s guard (a function ``guard(b, p)``)."""
    return _generate(cls)[0]


class _Guards(dict[type, BodyGuard]):
    """The compiled guards by class, each compiled on first use."""

    def __missing__(self, cls: type) -> BodyGuard:
        source, where = _generate(cls)
        filename = f"{_FILENAME_PREFIX}{cls.__module__}.{cls.__qualname__}>"
        # Registered so that a traceback through a guard shows its lines.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        _labels[filename] = where
        namespace: dict[str, Any] = dict(_HELPERS)
        exec(compile(source, filename, "exec"), namespace)
        guard: BodyGuard = namespace["guard"]
        self[cls] = guard
        return guard


_guards: Final = _Guards()


def guard_for(cls: type) -> BodyGuard:
    """The compiled guard of ``cls``: it returns where the body ends (possibly past
    the buffer) or raises."""
    return _guards[cls]


def _location(exc: BaseException) -> str:
    """The label of the deepest generated line in ``exc``'s traceback."""
    found = "the body"
    tb = exc.__traceback__
    while tb is not None:
        labels = _labels.get(tb.tb_frame.f_code.co_filename)
        if labels is not None and 0 < tb.tb_lineno <= len(labels):
            found = labels[tb.tb_lineno - 1]
        tb = tb.tb_next
    return found


def check_body(cls: type, data: bytes | memoryview, offset: int) -> str | None:
    """None when ``data[offset:]`` is safe to hand to kio's reader of ``cls``, else
    why not."""
    guard = _guards[cls]
    try:
        end = guard(data, offset)
    except _Bad as exc:
        return str(exc)
    except _Short as exc:
        return f"{exc} in {_location(exc)}"
    except (IndexError, struct.error) as exc:
        return f"frame ends at or before {_location(exc)}"
    if end > len(data):
        return f"body needs {end - offset} bytes, {len(data) - offset} present"
    return None
