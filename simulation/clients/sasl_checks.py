"""The checks of the SASL clients (`sasl_app`), over `SaslEvents` and the final logs.

1. **Nothing written while WRITE was revoked.** A Produce sent after the admin's DeleteAcls
   was answered and answered before its CreateAcls was sent was judged without the ACL:
   it must not be acknowledged, and its value must never be read -- by the SASL client,
   any other reader, or the final read-back. (A Produce whose answer was lost, or came
   after the CreateAcls left, may rightly have been written: not judged.) The window is
   exact here because every broker's authorizer reads the one cluster-wide ACL store; in
   Kafka a broker applies an ACL change when its metadata image does, a little later.
2. **The forbidden topic is never served.** Every answered Produce or Fetch on it is
   TOPIC_AUTHORIZATION_FAILED (29), from whichever broker (Kafka authorizes first).
3. **A wrong password never gets a session.** Every answered login with a wrong password is
   SASL_AUTHENTICATION_FAILED (58), and nothing is answered on its connection afterwards;
   every answered login with the right one succeeds.
4. **Every acknowledged write is read back** at its offset in the final log. (The same
   records are in ``acked_all``, so the lost-writes and duplicates checkers judge them too;
   this one says it for the SASL client alone.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simulation.clients.checks import Finding, _events
from simulation.clients.sasl_history import NO_ANSWER, SaslEvents, SaslSend

__all__ = ["check_sasl_clients"]

AUTHORIZATION_FAILED, AUTHENTICATION_FAILED = (
    "topic_authorization_failed",
    "sasl_authentication_failed",
)


def check_sasl_clients(
    sasl: SaslEvents,
    final_records: Mapping[str, Sequence[tuple[int, int, bytes]]],
    reads: Mapping[tuple[str, int, int], bytes],
) -> list[Finding]:
    return [
        nothing_written_while_revoked(sasl, final_records, reads),
        forbidden_topic_never_served(sasl),
        wrong_password_never_logs_in(sasl),
        acknowledged_writes_read_back(sasl, final_records),
    ]


def _judged(sasl: SaslEvents) -> list[tuple[SaslSend, tuple[float, float]]]:
    """Sends certainly judged while WRITE was revoked, with their window."""
    found = []
    for send in sasl.sends:
        window = sasl.revoked_during(send.sent_s, send.answered_s)
        if window is not None and send.error != NO_ANSWER:
            found.append((send, window))
    return found


def nothing_written_while_revoked(
    sasl: SaslEvents,
    final_records: Mapping[str, Sequence[tuple[int, int, bytes]]],
    reads: Mapping[tuple[str, int, int], bytes],
) -> Finding:
    judged = _judged(sasl)
    values = {send.value: (send, window) for send, window in judged}
    where: dict[bytes, list[str]] = {}
    for topic, records in sorted(final_records.items()):
        for partition, offset, value in records:
            if value in values:
                where.setdefault(value, []).append(
                    f"in the final log of {topic}-{partition}@{offset}"
                )
    for (topic, partition, offset), value in sorted(reads.items()):
        if value in values:
            where.setdefault(value, []).append(f"read at {topic}-{partition}@{offset}")
    acked = [(s, w) for s, w in judged if s.error == "none"]
    bad = [(s, w) for s, w in judged if s.error == "none" or s.value in where]
    windows = ", ".join(f"{a:.3f}-{b:.3f}s" for a, b in sasl.revoked) or "none"
    detail = (
        f"WRITE revoked {windows}: {len(judged)} Produce judged without it, "
        f"{len(acked)} acknowledged, {sum(1 for v in values if v in where)} read"
    )
    if bad:
        send, (start, end) = bad[0]
        detail += (
            f" (first: {sasl.principal}'s WRITE on {sasl.topic} gone {start:.3f}-{end:.3f}s; "
            + _events([send.describe(), *where.get(send.value, [])])
            + ")"
        )
    return Finding("SASL: nothing written while WRITE was revoked", not bad, detail)


def forbidden_topic_never_served(sasl: SaslEvents) -> Finding:
    answered = [f for f in sasl.forbidden]
    served = [f for f in answered if f.error != AUTHORIZATION_FAILED]
    detail = (
        f"{len(answered)} Produce/Fetch on {sasl.forbidden_topic} answered, "
        f"{len(served)} not TOPIC_AUTHORIZATION_FAILED"
    )
    if served:
        detail += " (first: " + _events(f.describe() for f in served) + ")"
    return Finding("SASL: the forbidden topic is never served", not served, detail)


def wrong_password_never_logs_in(sasl: SaslEvents) -> Finding:
    answered = [lg for lg in sasl.logins if lg.outcome != NO_ANSWER]
    wrong = [lg for lg in answered if not lg.right_password]
    broken = [lg for lg in wrong if lg.outcome != AUTHENTICATION_FAILED or lg.served_after]
    refused = [lg for lg in answered if lg.right_password and lg.outcome != "none"]
    detail = (
        f"{len(wrong)} wrong-password logins answered, {len(broken)} not refused or served "
        f"after; {len(answered) - len(wrong)} right-password logins, {len(refused)} refused"
    )
    if broken or refused:
        detail += " (first: " + _events(lg.describe() for lg in broken + refused) + ")"
    return Finding(
        "SASL: a wrong password never gets a session", not broken and not refused, detail
    )


def acknowledged_writes_read_back(
    sasl: SaslEvents, final_records: Mapping[str, Sequence[tuple[int, int, bytes]]]
) -> Finding:
    final = {(p, o): v for p, o, v in final_records.get(sasl.topic, [])}
    acked = [s for s in sasl.sends if s.offset is not None]
    lost = [s for s in acked if final.get((s.partition, s.offset or 0)) != s.value]
    detail = f"{len(acked)} acknowledged to the SASL producer, {len(lost)} not read back"
    if lost:
        first = lost[0]
        found = final.get((first.partition, first.offset or 0))
        detail += f" (first: {first.describe()}; the final log has {found!r} there)"
    return Finding("SASL: every acknowledged write read back", not lost, detail)
