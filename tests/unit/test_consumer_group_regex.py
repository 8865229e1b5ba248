"""Regex subscriptions (``SubscribedTopicRegex``) on the manual clock: RE2 full match,
INVALID_REGULAR_EXPRESSION with Kafka's message, topics created and deleted later,
new partitions, regex and name subscribers side by side, resolutions dropped with the
last subscriber, and a group that reloads its regex member from its records."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.consumer import ConsumerGroup, ConsumerGroupHeartbeatResult
from broker.group.consumer.regex_subscriptions import RegexResolver
from broker.group.group_log import InMemoryGroupLog
from tests.unit.test_consumer_group_coordinator import Member, World
from tests.unit.test_consumer_group_records import Node

E = ErrorCode


class RegexMember(Member):
    """A member subscribed by regex only (as librdkafka's ``subscribe(["^t.*"])``)."""

    def __init__(self, world: World, member_id: str, regex: str, **kw: Any) -> None:
        super().__init__(world, member_id, **kw)
        self.regex = regex

    def send(self, **kw: Any) -> ConsumerGroupHeartbeatResult:
        if self.epoch == 0:
            kw = {"subscribed_topic_names": None, "subscribed_topic_regex": self.regex, **kw}
        return super().send(**kw)


def regex_member(w: World, name: str, regex: str) -> RegexMember:
    m = RegexMember(w, name, regex)
    w.members.append(m)
    return m


def topics_of(w: World, m: Member) -> set[str]:
    names = {info.topic_id: name for name, info in w.h.metadata.topics.items()}
    return {names[t] for t in m.owned}


def test_a_regex_is_a_full_match_and_picks_up_topics_created_later() -> None:
    w = World()
    w.h.metadata.create_topic("t-two", 2, 1, {})
    w.h.metadata.create_topic("xt", 2, 1, {})  # "t.*" matches it only partially
    a = regex_member(w, "a", "t.*")
    w.converge()
    assert topics_of(w, a) == {"t", "t-two"}
    assert a.count() == 8
    assert w.group.resolved_regexes == {"t.*": frozenset({"t", "t-two"})}
    epoch = w.group.group_epoch

    w.h.metadata.create_topic("t-three", 3, 1, {})
    w.converge()
    assert topics_of(w, a) == {"t", "t-two", "t-three"}
    assert w.group.group_epoch == epoch + 1

    w.h.metadata.delete_topic("t-two")
    w.converge()
    assert topics_of(w, a) == {"t", "t-three"}
    assert w.group.group_epoch == epoch + 2


def test_an_unrelated_topic_does_not_bump_the_group_epoch() -> None:
    w = World()
    regex_member(w, "a", "t")
    w.converge()
    epoch = w.group.group_epoch
    w.h.metadata.create_topic("other", 2, 1, {})
    w.converge()
    assert w.group.group_epoch == epoch


def test_new_partitions_of_a_topic_matched_by_regex_bump_the_group_epoch() -> None:
    w = World()
    a = regex_member(w, "a", "t.*")
    w.converge()
    epoch = w.group.group_epoch
    w.h.metadata.create_partitions("t", 9)
    w.converge()
    assert w.group.group_epoch == epoch + 1
    assert a.count() == 9


def test_regex_and_name_subscribers_share_the_topics_they_both_want() -> None:
    w = World()
    w.h.metadata.create_topic("t-two", 4, 1, {})
    a = regex_member(w, "a", "t-.*")
    b = w.member("b", topics=("t", "t-two"))
    w.converge()
    assert topics_of(w, a) == {"t-two"}
    # The uniform assignor balances the members: t-two goes to the regex member.
    assert (a.count(), b.count()) == (4, 6)
    # The regex goes with its last subscriber.
    assert a.send(member_epoch=-1).error is E.none
    a.active, a.owned = False, {}
    w.converge()
    assert w.group.resolved_regexes == {}
    assert b.count() == 10


def test_a_bad_regex_is_invalid_regular_expression_and_changes_nothing() -> None:
    w = World()
    a = w.member("a")
    w.converge()
    epoch = w.group.group_epoch
    for regex, description in [
        ("t(", "missing closing )"),
        ("[t", "missing closing ]"),
        ("(?=t)", "invalid or unsupported Perl syntax"),
        ("t**", "invalid nested repetition operator"),
        ("(t{1000}){1000}", "invalid repeat count"),
        ("\\", "trailing backslash at end of expression"),
    ]:
        bad = RegexMember(w, f"bad-{regex}", regex)
        r = bad.send()
        assert r.error is E.invalid_regular_expression, regex
        assert r.error_message == (
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}."
        )
    # A member that switches to a bad regex is refused too, and keeps its subscription.
    r = a.send(subscribed_topic_regex="t(")
    assert r.error is E.invalid_regular_expression
    assert w.group.group_epoch == epoch and w.group.num_members == 1


def test_an_empty_regex_clears_it_and_the_member_stays_with_no_topics() -> None:
    w = World()
    a = regex_member(w, "a", "t")
    w.converge()
    assert a.count() == 6
    a.heartbeat(subscribed_topic_regex="")
    w.converge()
    assert a.count() == 0
    assert w.group.num_members == 1 and w.group.resolved_regexes == {}


def test_a_regex_member_comes_back_from_the_records() -> None:
    """The member's regex is in its ConsumerGroupMemberMetadata record; the resolution is
    computed again from the topics after a load, with no epoch bump and nothing written."""
    log = InMemoryGroupLog()
    node = Node(log)
    node.h.metadata.create_topic("t", 4, 1, {})
    node.h.metadata.create_topic("t-two", 2, 1, {})
    state = converge_regex(node, "t.*")
    old = node.coord.group("g")
    assert old is not None
    fresh = Node(log, topics=node.h.metadata)
    fresh.load()
    group = fresh.coord.group("g")
    assert group is not None
    assert group.members == old.members
    assert group.members["a"].subscribed_topic_regex == "t.*"
    written = len(log.records())
    epoch, owned = state
    r = fresh.heartbeat("a", epoch, owned)
    assert r.error is E.none and r.member_epoch == epoch
    assert group.group_epoch == old.group_epoch
    assert group.resolved_regexes == {"t.*": frozenset({"t", "t-two"})}
    assert len(log.records()) == written


def converge_regex(node: Node, regex: str) -> tuple[int, dict[Any, Any]]:
    epoch, owned = 0, {}
    for _ in range(5):
        extra = {"topics": None, "subscribed_topic_regex": regex} if epoch == 0 else {}
        r = node.heartbeat("a", epoch, owned, **extra)
        assert r.error is E.none, r
        epoch = r.member_epoch
        owned = dict(r.assignment) if r.assignment is not None else owned
    assert sum(len(ps) for ps in owned.values()) == 6
    return epoch, owned


def test_the_resolver_caches_only_short_patterns_and_bounds_its_cache() -> None:
    resolver = RegexResolver()
    for i in range(1000):
        resolver.resolve(f"t{i}", ["t1"])
    assert len(resolver._cache) == 256
    resolver.resolve("t" * 5000, ["t"])
    assert "t" * 5000 not in resolver._cache


def test_a_group_without_regexes_never_reads_the_topics() -> None:
    class Topics(dict[str, Any]):
        def items(self) -> Any:
            raise AssertionError("the topics were read")

    group = ConsumerGroup("g")
    assert RegexResolver().maybe_refresh(group, set(), Topics(), 7) is False
    assert group.resolved_regexes == {}


def test_a_regex_too_large_for_re2s_memory_budget_is_refused() -> None:
    """RE2 bounds a program's memory (8 MiB): a pattern past it cannot take the broker's
    memory; it is INVALID_REGULAR_EXPRESSION (RE2/J has no such bound)."""
    w = World()
    huge = "|".join(f"t{i}[a-z]{{50}}" for i in range(20000))
    r = RegexMember(w, "a", huge).send()
    assert r.error is E.invalid_regular_expression
    assert r.error_message is not None
    assert r.error_message.endswith("pattern too large - compile failed.")
    assert w.coord.group("g") is None
