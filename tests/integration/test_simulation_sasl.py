"""The SASL client with ACLs under the nemesis (issue 33): its checks appear and hold on a
seed with restarts and partitions, the same seed logs in the same way again (SCRAM's
nonces are the seed's on both sides, so the digest repeats), and the planted
``acl-removal-not-seen`` (the authorizer's cache keeps a deleted ALLOW) breaks "nothing
written while WRITE was revoked" with the write that shows it; ``no-acl-means-allowed`` and
``plain-password-not-checked`` break the forbidden-topic and the wrong-password checks."""

from __future__ import annotations

import logging

import pytest

from simulation.scenario import SimulationConfig, SimulationResult, simulate

SASL_CHECKS = {
    "SASL: nothing written while WRITE was revoked",
    "SASL: the forbidden topic is never served",
    "SASL: a wrong password never gets a session",
    "SASL: every acknowledged write read back",
}


def _run(plant: str | None = None) -> SimulationResult:
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    logging.getLogger("kafka.authorizer.logger").setLevel(logging.CRITICAL)
    faults = {"restart": 1, "partition": 1}
    return simulate(SimulationConfig(seed=1, duration_s=30, faults=faults, plant=plant))


def test_the_sasl_checks_hold_under_faults_and_the_run_repeats() -> None:
    first, again = _run(), _run()
    sasl = {v.name: v for v in first.verdicts if v.name.startswith("SASL:")}
    assert set(sasl) == SASL_CHECKS
    assert first.held, [v for v in first.verdicts if not v.held]
    events = first.history.protocol.sasl
    assert events.revoked and any(s.error == "topic_authorization_failed" for s in events.sends)
    assert any(s.offset is not None for s in events.sends) and events.reads
    assert {lg.outcome for lg in events.logins if not lg.right_password} == {
        "sasl_authentication_failed"
    }
    assert len([lg for lg in events.logins if lg.right_password]) >= 2  # a login per connection
    assert first.digest == again.digest


def test_an_acl_removal_the_authorizer_never_sees_is_caught() -> None:
    result = _run("acl-removal-not-seen")
    broken = {v.name: v for v in result.verdicts if not v.held}
    assert "SASL: nothing written while WRITE was revoked" in broken, broken
    assert "acknowledged" in broken["SASL: nothing written while WRITE was revoked"].detail


@pytest.mark.parametrize(
    ("plant", "check"),
    [
        ("no-acl-means-allowed", "SASL: the forbidden topic is never served"),
        ("plain-password-not-checked", "SASL: a wrong password never gets a session"),
    ],
)
def test_an_open_topic_or_an_unchecked_password_is_caught(plant: str, check: str) -> None:
    broken = {v.name: v for v in _run(plant).verdicts if not v.held}
    assert check in broken, broken
    assert "first:" in broken[check].detail  # the evidence: the request that was served
