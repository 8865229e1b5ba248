"""``--target-quotas`` and ``--target-users`` files, the SASL listener's addresses, the
SCRAM client's arithmetic and a response's throttle time (issue 22). No broker, no JVM."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_jobs.replay_client import throttle_time_ms
from spark_jobs.replay_sasl import read_users, replay_user, scram_client_final
from spark_jobs.target import TargetCluster, listener_addresses
from spark_jobs.target_quotas import parse_quota_file, quota_document, write_target_quotas


def test_kafka_configs_lines_become_the_brokers_quota_document(tmp_path: Path) -> None:
    path = tmp_path / "quotas.txt"
    path.write_text(
        "# comment\n\n"
        "--alter --entity-type clients --entity-name p1 --add-config producer_byte_rate=1024\n"
        "--entity-type users --entity-name alice --entity-type clients --entity-default "
        "--add-config consumer_byte_rate=2048,request_percentage=50\n"
    )
    entries = parse_quota_file(path)
    assert entries == [
        ((("client-id", "p1"),), {"producer_byte_rate": 1024.0}),
        (
            (("user", "alice"), ("client-id", None)),
            {"consumer_byte_rate": 2048.0, "request_percentage": 50.0},
        ),
    ]
    written = write_target_quotas(entries, tmp_path / "data")
    assert written.name == "client-quotas.json"
    document = json.loads(written.read_text())
    # The document form reads back to the same entries.
    again = tmp_path / "again.json"
    again.write_text(json.dumps(document))
    assert parse_quota_file(again) == entries
    assert document == quota_document(entries)


@pytest.mark.parametrize(
    "line",
    [
        "--entity-type clients --entity-name p1 --add-config producer_byte_rate=0",
        "--entity-type clients --entity-name p1 --add-config no_such_quota=5",
        "--entity-type topics --entity-name t --add-config producer_byte_rate=5",
        "--entity-type clients --entity-name p1",
        "--entity-type clients --entity-name p1 --add-config producer_byte_rate",
    ],
)
def test_bad_quota_lines_are_refused(tmp_path: Path, line: str) -> None:
    path = tmp_path / "quotas.txt"
    path.write_text(line + "\n")
    with pytest.raises(ValueError):
        parse_quota_file(path)


def test_users_file_forms(tmp_path: Path) -> None:
    lines = tmp_path / "users.txt"
    lines.write_text("# who\nalice=s3cret=x\nbob=pw\n")
    assert read_users(lines) == {"alice": "s3cret=x", "bob": "pw"}
    document = tmp_path / "users.json"
    document.write_text('{"alice": "pw"}')
    assert read_users(document) == {"alice": "pw"}
    document.write_text('{"a,b": "pw"}')
    with pytest.raises(ValueError):
        read_users(document)


def test_replay_user_is_a_known_user_principal() -> None:
    users = {"alice": "pw"}
    assert replay_user("User:alice", users) == "alice"
    assert replay_user("User:bob", users) is None
    assert replay_user("User:ANONYMOUS", users) is None
    assert replay_user(None, users) is None
    assert replay_user("Group:alice", users) is None


def test_sasl_addresses_follow_the_bootstrap_order() -> None:
    plain = "127.0.0.1:9000,127.0.0.1:9001"
    sasl = "127.0.0.1:9100,127.0.0.1:9101"
    ids = {1: ("127.0.0.1", 9001), 0: ("127.0.0.1", 9000)}
    assert listener_addresses(plain, sasl, ids) == {0: ("127.0.0.1", 9100), 1: ("127.0.0.1", 9101)}


def test_target_with_users_gets_a_sasl_listener_knowing_them(tmp_path: Path) -> None:
    argv = TargetCluster(1, users={"alice": "pw"}, data_dir=tmp_path).command()
    assert argv[argv.index("--security") + 1] == "sasl_plaintext"
    assert argv[argv.index("--data-dir") + 1] == str(tmp_path)
    assert "SCRAM-SHA-512=[name=alice,password=pw]" in argv
    assert any('user_alice="pw"' in a for a in argv)
    assert "--security" not in TargetCluster(1).command()


def test_scram_client_final_matches_rfc_7677() -> None:
    """RFC 7677 section 3's SCRAM-SHA-256 exchange (user "user", password "pencil")."""
    first = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = (
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final, server_signature = scram_client_final(
        "sha256", "pencil", first, server_first, "rOprNGfwEbeRWgbNEkqO"
    )
    assert final == (
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert server_signature == "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_throttle_time_of_a_response() -> None:
    assert throttle_time_ms(SimpleNamespace(throttle_time=timedelta(milliseconds=1500))) == 1500
    assert throttle_time_ms(SimpleNamespace(throttle_time=0)) == 0
    assert throttle_time_ms(SimpleNamespace()) is None
