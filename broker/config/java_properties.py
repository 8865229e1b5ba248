"""Java's ``.properties`` syntax, as ``java.util.Properties.load`` reads ``server.properties``."""

from __future__ import annotations

import re

from broker.config.config_error import ConfigError


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """Parse a Java ``.properties`` file as ``java.util.Properties.load`` does.

    Kafka reads ``server.properties`` with ``Properties.load``, so its syntax is the
    syntax here: ``#`` and ``!`` comment lines; a key ends at the first unescaped ``=``,
    ``:`` or whitespace, and one ``=``/``:`` (with whitespace around it) separates it
    from the value; a line ending in an odd number of backslashes continues on the next
    line (whose leading whitespace is dropped); ``\\t``, ``\\n``, ``\\r``, ``\\f`` and
    ``\\uXXXX`` are escapes and a backslash before any other character is that character
    (``\\:``, ``\\=``, ``\\ ``, ``\\\\``). A line with a key only has the empty
    value. The last of repeated keys wins. Values keep their text; ``load_config``
    trims them as Kafka's ``ConfigDef`` does.
    """
    result: dict[str, str] = {}
    for number, logical in _logical_lines(text):
        key, value = _split_key_value(logical, source, number)
        result[key] = value
    return result


_PROPERTIES_WHITESPACE = " \t\f"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # Java's line terminators, no others
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) without comments, blank lines, continuations."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, natural in enumerate(_LINE_BREAK.split(text), start=1):
        line = natural.lstrip(_PROPERTIES_WHITESPACE)
        if pending is None:
            if not line or line[0] in "#!":
                continue  # a comment line never continues, whatever it ends with
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        piece = line[:-1] if continued else line
        pending = piece if pending is None else pending + piece
        if not continued:
            out.append((start, pending))
            pending = None
    if pending is not None:  # a continuation at the end of the file: Java keeps what is there
        out.append((start, pending))
    return out


def _split_key_value(line: str, source: str, number: int) -> tuple[str, str]:
    """Cut one logical line into its unescaped key and value."""
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _PROPERTIES_WHITESPACE:
            break
        i += 1
    raw_key = line[:i]
    j = i
    while j < n and line[j] in _PROPERTIES_WHITESPACE:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _PROPERTIES_WHITESPACE:
            j += 1
    return _unescape(raw_key, source, number), _unescape(line[j:], source, number)


def _unescape(text: str, source: str, number: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(
                    f"{source}:{number}: malformed \\uxxxx escape {text[i : i + 6]!r}"
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
