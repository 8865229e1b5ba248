"""The SASL clients' checks on hand-made histories: one that holds, one per violation, and
what a correct broker produces that must not be taken for one (a Produce whose answer was
lost, or came after the ACL was given back; a login the network cut)."""

from __future__ import annotations

import math

from simulation.clients.sasl_checks import check_sasl_clients
from simulation.clients.sasl_history import (
    NO_ANSWER,
    ForbiddenAsk,
    SaslEvents,
    SaslLogin,
    SaslSend,
)

DENIED = "topic_authorization_failed"


def _events() -> SaslEvents:
    events = SaslEvents(topic="t", forbidden_topic="f", principal="User:u")
    events.revoked.append((10.0, 20.0))
    events.sends += [
        SaslSend("t", 0, b"before", 1.0, 1.1, "none", 0),
        SaslSend("t", 0, b"denied", 12.0, 12.1, DENIED),
        # answered after the CreateAcls left: may rightly be written
        SaslSend("t", 0, b"late", 19.0, 21.0, "none", 1),
        # no answer: it may have reached a broker once the ACL was back
        SaslSend("t", 0, b"lost", 12.0, math.inf, NO_ANSWER),
    ]
    events.logins += [
        SaslLogin("app", "SCRAM-SHA-256", True, 0.5, "none"),
        SaslLogin("intruder", "PLAIN", False, 2.0, "sasl_authentication_failed"),
        SaslLogin("intruder", "SCRAM-SHA-256", False, 4.0, NO_ANSWER),
    ]
    events.forbidden.append(ForbiddenAsk("Fetch", 1, 3.0, DENIED))
    return events


FINAL = {"t": [(0, 0, b"before"), (0, 1, b"late"), (0, 2, b"lost")]}


def _verdicts(
    events: SaslEvents,
    final: dict[str, list[tuple[int, int, bytes]]] | None = None,
    reads: dict[tuple[str, int, int], bytes] | None = None,
) -> dict[str, tuple[bool, str]]:
    found = check_sasl_clients(events, final if final is not None else FINAL, reads or {})
    return {f.name: (f.held, f.detail) for f in found}


def test_a_correct_history_holds_and_so_does_an_empty_one() -> None:
    verdicts = _verdicts(_events())
    assert len(verdicts) == 4 and all(held for held, _ in verdicts.values()), verdicts
    empty = check_sasl_clients(SaslEvents(), {}, {})  # the run's table lists every check
    assert len(empty) == 4 and all(f.held for f in empty)


def test_a_write_acknowledged_or_read_while_revoked_is_caught_with_its_evidence() -> None:
    events = _events()
    events.sends.append(SaslSend("t", 1, b"sneaked", 13.0, 13.5, "none", 0))
    held, detail = _verdicts(events)["SASL: nothing written while WRITE was revoked"]
    assert not held and "b'sneaked'" in detail and "10.000-20.000s" in detail
    # refused, yet its value turns up in a read
    held, detail = _verdicts(_events(), reads={("t", 0, 5): b"denied"})[
        "SASL: nothing written while WRITE was revoked"
    ]
    assert not held and "read at t-0@5" in detail


def test_the_forbidden_topic_served_once_is_caught() -> None:
    events = _events()
    events.forbidden.append(ForbiddenAsk("Produce", 2, 5.0, "none"))
    held, detail = _verdicts(events)["SASL: the forbidden topic is never served"]
    assert not held and "Produce to broker 2" in detail


def test_a_session_for_a_wrong_password_or_a_refused_right_one_is_caught() -> None:
    for login in (
        SaslLogin("intruder", "PLAIN", False, 6.0, "none"),
        SaslLogin("intruder", "SCRAM-SHA-256", False, 6.0, "sasl_authentication_failed", True),
        SaslLogin("app", "SCRAM-SHA-256", True, 6.0, "sasl_authentication_failed"),
    ):
        events = _events()
        events.logins.append(login)
        held, detail = _verdicts(events)["SASL: a wrong password never gets a session"]
        assert not held and login.describe() in detail


def test_an_acknowledged_write_missing_from_the_final_log_is_caught() -> None:
    held, detail = _verdicts(_events(), {"t": [(0, 1, b"late")]})[
        "SASL: every acknowledged write read back"
    ]
    assert not held and "b'before'" in detail
