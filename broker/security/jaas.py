"""Kafka's ``sasl.jaas.config`` values: one JAAS login module entry.

Syntax (Kafka's ``JaasConfig``): ``<LoginModuleClass> <flag> [key=value ...];`` where the
flag is required/requisite/sufficient/optional and a value is a bare token or a
double-quoted string (``\\`` escapes the next character). Kafka's PlainLoginModule reads
its users from ``user_<name>="<password>"`` options (``plain.py``). Only one entry per
value, as Kafka requires of ``sasl.jaas.config``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.DOTALL)


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value Kafka would refuse."""


@dataclass(frozen=True)
class AppConfigurationEntry:
    login_module_name: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) pairs: kind is 'word', 'string', '=' or ';'."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None:
            raise JaasConfigError(
                f"Unexpected character in JAAS config at {text[pos : pos + 20]!r}"
            )
        quoted, word, equals, semi = match.groups()
        if quoted is not None:
            out.append(("string", re.sub(r"\\(.)", r"\1", quoted, flags=re.DOTALL)))
        elif word is not None:
            out.append(("word", word))
        elif equals is not None:
            out.append(("=", "="))
        else:
            out.append((";", semi or ";"))
        pos = match.end()
    return out


def parse_jaas_config(text: str) -> AppConfigurationEntry:
    """One login module entry; raises ``JaasConfigError`` as Kafka's JaasConfig does."""
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise JaasConfigError("Invalid JAAS config: expected <LoginModule> <flag> [options];")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise JaasConfigError(f"Invalid control flag '{tokens[1][1]}' in JAAS config")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "=":
            raise JaasConfigError("Invalid JAAS config: expected key=value options")
        if tokens[i + 2][0] not in ("word", "string"):
            raise JaasConfigError(f"Invalid JAAS config: no value for option {tokens[i][1]}")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise JaasConfigError("Invalid JAAS config: the entry must end with ';'")
    if i + 1 != len(tokens):
        raise JaasConfigError("JAAS config property contains 2 login modules, should be 1 module")
    return AppConfigurationEntry(module, flag, options)


def plain_users(entry: AppConfigurationEntry) -> dict[str, str]:
    """PlainLoginModule's users: the ``user_<name>`` options, name -> password."""
    return {k[len("user_") :]: v for k, v in entry.options.items() if k.startswith("user_")}
