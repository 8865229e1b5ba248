"""Generated Python source, compiled once: what the fast writers and the coordinator
record codecs both need.

Both turn a schema into straight-line code (``struct`` calls with merged formats, no
per-field dispatch at run time), the way Kafka's generator writes Java for its messages.
A ``SourceGen`` hands out unique local names and keeps the constants the generated code
refers to (``struct`` methods, defaults, tables) in the namespace it is executed in;
``load_source`` compiles it and registers the text with ``linecache``, so that a traceback
through generated code shows its lines.
"""

from __future__ import annotations

import linecache
import struct
from typing import Any


class SourceGen:
    """Unique names and the namespace of one piece of generated source."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self._count = 0
        self._struct_methods: dict[tuple[str, str], str] = {}

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def constant(self, value: object, prefix: str) -> str:
        name = self.name(prefix)
        self.namespace[name] = value
        return name

    def struct_method(self, fmt: str, method: str = "pack") -> str:
        """The name of ``struct.Struct(fmt).<method>``, one constant per format and method."""
        key = (fmt, method)
        name = self._struct_methods.get(key)
        if name is None:
            bound = getattr(struct.Struct(fmt), method)
            name = self._struct_methods[key] = self.constant(
                bound, "_P" if method == "pack" else "_U"
            )
        return name


def load_source(source: str, filename: str, constants: dict[str, Any]) -> dict[str, Any]:
    """Compile and run ``source`` over a copy of ``constants``; its namespace afterwards."""
    namespace = dict(constants)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace
