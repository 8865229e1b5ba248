"""``minikafka acls add|list|remove`` (kafka-acls.sh) against a cluster with the authorizer."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from broker.security.authorizer.standard_authorizer import STANDARD_AUTHORIZER

AUTHORIZED = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "minikafka", "acls", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MINIKAFKA_BOOTSTRAP": bootstrap},
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result.stdout


ALICE_READ = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
ORDERS = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
PAY = "ResourcePattern(resourceType=TOPIC, name=pay-, patternType=PREFIXED)"


@pytest.mark.minikafka(overrides=AUTHORIZED)
def test_acls_add_list_remove(minikafka: Any) -> None:
    b = minikafka.bootstrap_servers
    added = ok(
        cli(b, "add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    )
    assert f"Adding ACLs for resource `{ORDERS}`: \n \t{ALICE_READ} \n" in added
    assert f"Current ACLs for resource `{ORDERS}`: \n \t{ALICE_READ} \n" in added
    ok(
        cli(
            b,
            "add",
            "--deny-principal",
            "User:bob",
            "--topic",
            "pay-",
            "--resource-pattern-type",
            "prefixed",
        )
    )
    listed = ok(cli(b, "list"))
    assert ORDERS in listed and PAY in listed
    assert "(principal=User:bob, host=*, operation=ALL, permissionType=DENY)" in listed
    assert PAY not in ok(cli(b, "list", "--topic", "orders", "--resource-pattern-type", "match"))
    removed = ok(cli(b, "remove", "--topic", "orders", "--force"))
    assert f"Removing ACLs for resource `{ORDERS}`: \n \t{ALICE_READ} \n" in removed
    assert ORDERS not in ok(cli(b, "list"))


@pytest.mark.minikafka
def test_acls_without_an_authorizer_says_so(minikafka: Any) -> None:
    result = cli(minikafka.bootstrap_servers, "list")
    assert result.returncode == 1
    assert "No Authorizer is configured." in result.stderr
    refused = cli(minikafka.bootstrap_servers, "add", "--allow-principal", "User:a")
    assert refused.returncode == 2 and "a resource is required" in refused.stderr
