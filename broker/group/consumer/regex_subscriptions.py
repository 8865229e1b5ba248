"""Regular expression subscriptions of KIP-848 members (``SubscribedTopicRegex``),
evaluated on the broker as Kafka 4 does: with RE2 (Kafka uses RE2/J, ``com.google.re2j``;
here Google's RE2 through ``google-re2``), a **full** match of the topic name, so no
pattern can backtrack catastrophically and matching is linear in the name.

* A regex is compiled when a member subscribes with it; a bad one answers
  INVALID_REGULAR_EXPRESSION with Kafka's message, "SubscribedTopicRegex `<regex>` is not
  a valid regular expression: <description>.", the description as RE2/J words it (RE2's
  error codes mapped to RE2/J's texts). The compiled programs are bounded by RE2's
  ``max_mem`` (8 MiB): a pattern whose program would be larger is refused the same way
  ("pattern too large - compile failed"), so an oversized regex cannot take memory;
  compiled patterns up to ``CACHEABLE_LENGTH`` characters are cached, at most
  ``CACHE_SIZE`` of them.
* A group resolves each regex its members use to the set of topics it matches
  (``ConsumerGroup.resolved_regexes``, Kafka's ``resolvedRegularExpressions``) and keeps
  the topics image version it resolved them at. ``maybe_refresh`` resolves again when a
  regex appears or the image changed since (a topic created or deleted): the regexes'
  topics are part of the group's subscribed topics, so a new matching topic (or a new
  partition of one) changes the subscription metadata and bumps the group epoch.

Where this differs from Kafka: Kafka resolves regexes asynchronously (an executor, at
most every few seconds per group) and writes the result as a ConsumerGroupRegularExpression
record (key version 16, Kafka 4.0; the Kafka mirror this project reads predates it); here
the resolution runs on the heartbeat that needs it, synchronously (one pass of an RE2
``Set`` of the group's regexes over the topic names: about 20 ms for 10,000 topics), and
is not written: it is recomputed from the topics after a load (the group's subscription
metadata record still tells whether it changed). Internal topics
(``__consumer_offsets``, ``__transaction_state``) never match, as for a Java consumer's
pattern subscription with ``exclude.internal.topics=true``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

import re2
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import TopicInfo
from broker.group.consumer.consumer_group import ConsumerGroup
from broker.group.consumer.errors import ApiError

log = logging.getLogger("broker.group.consumer")

CACHE_SIZE = 256
CACHEABLE_LENGTH = 1024

# RE2's error texts (the part before ": ") as RE2/J's PatternSyntaxException describes them.
_RE2J_DESCRIPTIONS = {
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "missing (": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
}


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    return options


def _description(error: Exception) -> str:
    text = error.args[0] if error.args else str(error)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    code = str(text).split(": ", 1)[0]
    return _RE2J_DESCRIPTIONS.get(code, code)


class RegexResolver:
    """Compiles and resolves regexes, with a small cache of compiled short patterns
    (oldest out first), so a client cannot fill memory with patterns. One per
    coordinator."""

    def __init__(self) -> None:
        self._cache: dict[str, re2._Regexp | str] = {}

    def _compile(self, regex: str) -> re2._Regexp | str:
        """The compiled regex or RE2/J's description of its error."""
        found = self._cache.get(regex)
        if found is not None:
            return found
        try:
            compiled: re2._Regexp | str = re2.compile(regex, options=_options())
        except re2.error as error:
            compiled = _description(error)
        if len(regex) <= CACHEABLE_LENGTH:
            if len(self._cache) >= CACHE_SIZE:
                del self._cache[next(iter(self._cache))]
            self._cache[regex] = compiled
        return compiled

    def compile(self, regex: str) -> re2._Regexp:
        """The compiled regex; INVALID_REGULAR_EXPRESSION (Kafka's message) when bad."""
        compiled = self._compile(regex)
        if isinstance(compiled, str):
            raise ApiError(
                ErrorCode.invalid_regular_expression,
                f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {compiled}.",
            )
        return compiled

    def resolve(self, regex: str, topic_names: Iterable[str]) -> frozenset[str]:
        """The topics ``regex`` fully matches (none for a regex that does not compile)."""
        compiled = self._compile(regex)
        if isinstance(compiled, str):
            return frozenset()
        return frozenset(name for name in topic_names if compiled.fullmatch(name) is not None)

    def resolve_all(
        self, regexes: Sequence[str], topic_names: Sequence[str]
    ) -> dict[str, frozenset[str]]:
        """Every regex's topics in one pass over the names (an RE2 ``Set``: each name is
        matched against all the regexes at once); regex by regex if the set does not
        compile (RE2's memory budget)."""
        valid = [r for r in regexes if not isinstance(self._compile(r), str)]
        found: dict[str, set[str]] = {r: set() for r in regexes}
        regex_set = re2._re2.Set(re2._re2.RE2.Anchor.ANCHOR_BOTH, re2._re2.RE2.Options())
        if all(regex_set.Add(r.encode()) >= 0 for r in valid) and regex_set.Compile():
            for name in topic_names:
                for index in regex_set.Match(name.encode()):
                    found[valid[index]].add(name)
            return {r: frozenset(t) for r, t in found.items()}
        return {r: self.resolve(r, topic_names) for r in regexes}

    def maybe_refresh(
        self,
        group: ConsumerGroup,
        regexes: Iterable[str],
        topics: Mapping[str, TopicInfo],
        topics_version: int,
    ) -> bool:
        """Resolve the group's ``regexes`` again when one of them is new or the topics
        image changed since the last resolution; drop the resolutions of regexes no
        longer used. True when a resolution changed."""
        wanted = set(regexes)
        current = group.resolved_regexes
        if not wanted:  # no regex in the group: nothing to resolve, whatever changed
            group.resolved_regexes = {}
            return bool(current)
        if topics_version == group.regexes_version and wanted <= current.keys():
            if current.keys() - wanted:
                group.resolved_regexes = {r: current[r] for r in wanted}
            return False
        names = [name for name, info in topics.items() if not info.is_internal]
        resolved = self.resolve_all(sorted(wanted), names)
        changed = {r: current.get(r) for r in wanted} != resolved
        if changed:
            log.info(
                "[GroupId %s] Resolved regular expressions: %s.",
                group.group_id,
                {r: sorted(t) for r, t in resolved.items()},
            )
        group.resolved_regexes = resolved
        group.regexes_version = topics_version
        return changed


def regex_topics(group: ConsumerGroup, regexes: Iterable[str]) -> set[str]:
    """The topics the group's resolved ``regexes`` match."""
    topics: set[str] = set()
    for regex in regexes:
        topics |= group.resolved_regexes.get(regex, frozenset())
    return topics
