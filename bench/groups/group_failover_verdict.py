"""What the group-failover soak counts as failure, and how it prints a run (split from
``group_failover_soak.py``): the client errors a Kafka cluster gives while its brokers
restart one at a time, the broker log lines worth showing, the verdict and the table."""

from __future__ import annotations

import contextlib
import re
from datetime import datetime
from pathlib import Path
from typing import Any

SESSION_TIMEOUT_MS = 10000

#: Errors a Kafka cluster gives its clients while its brokers are stopped and restarted
#: one at a time (leaders and coordinators move, connections drop, a rebalance follows).
#: Anything else -- in particular aiokafka's ``KafkaError("Unexpected exception in
#: heartbeat task: ...")``, which a Kafka broker never provokes -- fails the verdict.
EXPECTED_PRODUCER = frozenset(
    {
        "KafkaTimeoutError",
        "RequestTimedOutError",
        "KafkaConnectionError",
        "NodeNotReadyError",
        "NotLeaderForPartitionError",
        "LeaderNotAvailableError",
        "NotEnoughReplicasError",
        "NotEnoughReplicasAfterAppendError",
        "UnknownTopicOrPartitionError",
    }
)
EXPECTED_CONSUMER = frozenset(
    {
        "CommitFailedError",
        "RebalanceInProgressError",
        "IllegalGenerationError",
        "UnknownMemberIdError",
        "NotCoordinatorForGroupError",
        "GroupCoordinatorNotAvailableError",
        "GroupLoadInProgressError",
        "RequestTimedOutError",
        "KafkaTimeoutError",
        "KafkaConnectionError",
        "NodeNotReadyError",
        "NotLeaderForPartitionError",
        "LeaderNotAvailableError",
        "UnknownTopicOrPartitionError",
    }
)

BROKER_LOG_MEMBER = re.compile(r"has failed|remov\w* (\S+ )?member|member\S* .*remov", re.I)
BROKER_LOG_ERROR = re.compile(r" (ERROR|CRITICAL) |Traceback")
_LONG_NUMBER = re.compile(r"\d{4,}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def fold(message: str) -> str:
    """Long numbers (offsets, ports) and uuids folded, so that messages of a kind group."""
    return _LONG_NUMBER.sub("N", _UUID.sub("<uuid>", message))


def error_kind(exc: BaseException) -> str:
    """``Type: message``, folded."""
    message = fold(str(exc)).strip()
    name = type(exc).__name__
    message = message.removeprefix(f"{name}: ")  # aiokafka's KafkaError names itself
    return f"{name}: {message[:200]}" if message else name


def expected_kind(kind: str, expected: frozenset[str]) -> bool:
    return kind.split(":", 1)[0] in expected


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def broker_log_lines(path: Path, wall0: float, shutdown_s: float) -> tuple[list[str], list[str]]:
    """The member lines and the ERROR/Traceback lines, each prefixed with its time on the
    run's axis; lines from the clients' shutdown (LeaveGroup) are marked so."""
    member, errors = [], []
    with path.open(errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            where = ""
            with contextlib.suppress(ValueError):
                stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                t = stamp - wall0
                where = f"t={t:.1f}s " + ("[shutdown] " if t >= shutdown_s else "")
            if BROKER_LOG_MEMBER.search(line):
                member.append(where + line[24:])
            elif BROKER_LOG_ERROR.search(line):
                errors.append(where + line[24:])
    return member, errors


def verdict(r: dict[str, Any]) -> str:
    reasons = []
    if r.get("acknowledged_lost"):
        reasons.append(f"{r['acknowledged_lost']} acknowledged records lost")
    if r.get("acknowledged_never_delivered"):
        reasons.append(f"{r['acknowledged_never_delivered']} acknowledged records never delivered")
    if r.get("longest_stall_s", 0) >= SESSION_TIMEOUT_MS / 1000:
        reasons.append(
            f"longest stall {r['longest_stall_s']:.1f} s >= session timeout "
            f"{SESSION_TIMEOUT_MS / 1000:.0f} s"
        )
    odd = [k for k in r.get("producer_errors", {}) if not expected_kind(k, EXPECTED_PRODUCER)]
    odd += [
        k
        for k in r.get("consumer_errors", {})
        if not expected_kind(
            k.split(": ", 1)[1] if k.startswith(("start:", "commit:")) else k, EXPECTED_CONSUMER
        )
    ]
    if odd:
        reasons.append("client errors a Kafka broker would not cause: " + " | ".join(odd))
    if not r.get("acknowledged"):
        reasons.append("nothing was acknowledged")
    return "verdict: OK" if not reasons else "verdict: FAILED: " + "; ".join(reasons)


# -- output ----------------------------------------------------------------------------


def print_report(r: dict[str, Any], log_lines: int) -> None:
    def row(name: str, value: object) -> None:
        print(f"  {name:<44} {value}")

    print(f"group failover soak: broker {r['broker_cwd']}, topic {r['topic']}, seed {r['seed']}")
    row("cycles (asked)", f"{r['cycles']} ({r['cycles_asked']}), interval {r['interval_s']} s")
    row("producing", f"{r['produce_s']} s at {r['rate']}/s, {r['ids_used']} ids")
    row("records acknowledged", r["acknowledged"])
    row("never acknowledged (app gave up)", r["never_acknowledged"])
    row("records in the topic at the end", r["records_in_topic"])
    row("acknowledged records lost", r["acknowledged_lost"])
    row("acknowledged records never delivered", r["acknowledged_never_delivered"])
    row("deliveries to the group", r["deliveries"])
    row("duplicates delivered", r["duplicates_delivered"])
    stall = f"{r['longest_stall_s']:.2f} s from t={r['longest_stall_at_s']:.1f} s"
    if r["longest_stall_cycle"] is not None:
        stall += f" (cycle {r['longest_stall_cycle']})"
    row("longest stall (records pending, none delivered)", stall)
    row("drain after the producer stopped", f"{r['drain_s']} s")
    row(
        "produce-to-delivery p50 / p99 / max",
        f"{r['latency_p50_s']} / {r['latency_p99_s']} / {r['latency_max_s']} s",
    )
    print("members:")
    for m in r["members"]:
        print(
            f"  member {m['member']}: {m['deliveries']} records in {m['batches']} batches, "
            f"{m['commits']} commits, {m['errors']} errors, last delivery t="
            f"{m['last_delivery_s']} s; {m['state']}"
        )
    print("cycles:  # broker  stopped_at  down_s  healthy_after_s  note")
    for c in r["cycle_rows"]:
        healthy = "-" if c["healthy_after_s"] is None else f"{c['healthy_after_s']:.1f}"
        print(
            f"  {c['cycle']:>5} {c['broker']:>6} {c['stopped_at_s']:>11.1f} "
            f"{c['down_s']:>7.1f} {healthy:>16}  {c['note']}"
        )
    for title, counts in (
        ("producer errors", r["producer_errors"]),
        ("consumer errors (seen by the application)", r["consumer_errors"]),
        ("aiokafka log, WARNING and above", r["aiokafka_log"]),
    ):
        print(f"{title}:" + ("" if counts else " none"))
        for kind, n in counts.items():
            print(f"  {n:>7}  {kind}")
    for title, lines in (
        ("broker log: member failed / removed", r["broker_log_member_lines"]),
        ("broker log: ERROR / Traceback", r["broker_log_error_lines"]),
    ):
        print(f"{title}: {len(lines)} lines" + (":" if lines else ""))
        for line in lines[:log_lines]:
            print(f"  {line[:240]}")
        if len(lines) > log_lines:
            print(f"  ... {len(lines) - log_lines} more in {r['broker_log']}")
    print(f"broker exit code {r['broker_exit_code']}; log {r['broker_log']}")
    for note in r["notes"]:
        print(f"note: {note}")
    print(r["verdict"])
