"""``minikafka acls add|list|remove``: what ``kafka-acls.sh --add|--list|--remove`` does,
with its options and its output (``Adding ACLs for resource ...``, ``Current ACLs for
resource ...``), through CreateAcls, DescribeAcls and DeleteAcls.

Options as Kafka's tool: a resource (``--topic T``, ``--group G``, ``--cluster``,
``--transactional-id T``, each repeatable but for ``--cluster``;
``--resource-pattern-type`` literal, prefixed, or for list/remove also match and any),
``--allow-principal``/``--deny-principal`` (repeatable, ``User:alice``),
``--allow-host``/``--deny-host`` (``*`` when none is given), ``--operation`` (repeatable;
ALL when none is given). ``list`` takes ``--principal`` to keep one principal's ACLs.

Differences from Kafka's tool: ``remove`` never asks for confirmation (as with
``--force``); without a resource ``remove`` is refused instead of removing every ACL
after a prompt; the tool connects over PLAINTEXT (its principal is ``User:ANONYMOUS``,
which needs CLUSTER ALTER or to be a super user).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from itertools import product
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client import AdminError, KafkaClient, error_name
from kafka_tools.client.cluster import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from protocol.acl_types import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from protocol.builders import Builder

Resource = tuple[ResourceType, str]


NO_RESOURCE = "a resource is required: --topic, --group, --cluster or --transactional-id"
Entry = tuple[str | None, str | None, AclOperation, AclPermissionType]


class AclUsageError(Exception):
    """A bad combination of options (exit 2)."""


def add_acl_parsers(sub: Any, bootstrap_option: Any) -> None:
    acls = sub.add_parser("acls", help="add, list, remove ACLs (kafka-acls)")
    actions = acls.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (
        ("add", "add ACLs"),
        ("list", "list ACLs"),
        ("remove", "remove ACLs"),
    ):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("--topic", action="append", default=[], metavar="T")
        parser.add_argument("--group", action="append", default=[], metavar="G")
        parser.add_argument("--transactional-id", action="append", default=[], metavar="T")
        parser.add_argument("--cluster", action="store_true", help="the cluster resource")
        parser.add_argument(
            "--resource-pattern-type",
            default="literal" if name == "add" else "any" if name == "list" else "literal",
            choices=("literal", "prefixed", "match", "any"),
        )
        if name == "list":
            parser.add_argument("--principal", default=None, metavar="P")
        else:
            for option in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host"):
                parser.add_argument(option, action="append", default=[], metavar="P")
            parser.add_argument("--operation", action="append", default=[], metavar="OP")
            parser.add_argument("--force", action="store_true", help="(never asks anyway)")
        bootstrap_option(parser)


def _resources(args: argparse.Namespace) -> list[Resource]:
    found: list[Resource] = [(ResourceType.TOPIC, t) for t in args.topic]
    found += [(ResourceType.GROUP, g) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _pattern(text: str) -> PatternType:
    return PatternType[text.upper()]


def _operations(args: argparse.Namespace, default: AclOperation) -> list[AclOperation]:
    try:
        return [AclOperation[op.strip().upper().replace("-", "_")] for op in args.operation] or [
            default
        ]
    except KeyError as exc:
        raise AclUsageError(f"unknown operation {exc.args[0]}") from None


def _entries(
    args: argparse.Namespace, default_op: AclOperation, default_host: str | None
) -> list[Entry]:
    """(principal, host, operation, permission) for every combination Kafka's tool makes."""
    entries: list[Entry] = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        hosts = hosts or [default_host]
        for principal, host, op in product(principals, hosts, _operations(args, default_op)):
            entries.append((principal, host, op, permission))
    return entries


def pattern_text(resource_type: int, name: str, pattern_type: int) -> str:
    return (
        f"ResourcePattern(resourceType={ResourceType(resource_type).name}, name={name}, "
        f"patternType={PatternType(pattern_type).name})"
    )


def entry_text(principal: str, host: str, operation: int, permission: int) -> str:
    return (
        f"(principal={principal}, host={host}, operation={AclOperation(operation).name}, "
        f"permissionType={AclPermissionType(permission).name})"
    )


def _print_block(title: str, resource: str, entries: Sequence[str]) -> None:
    print(f"{title} for resource `{resource}`: ")
    for entry in entries:
        print(f" \t{entry} ")
    print()


async def _describe(
    client: KafkaClient,
    resource: Resource | None,
    pattern: PatternType,
    principal: str | None = None,
) -> list[tuple[str, list[str]]]:
    def build(b: Builder, version: int) -> Any:
        return b.DescribeAclsRequest(
            resource_type_filter=int(resource[0] if resource else ResourceType.ANY),
            resource_name_filter=resource[1] if resource else None,
            pattern_type_filter=int(pattern),
            principal_filter=principal,
            host_filter=None,
            operation=int(AclOperation.ANY),
            permission_type=int(AclPermissionType.ANY),
        )

    response = await client.call(DESCRIBE_ACLS, build)
    if response.error_code is not ErrorCode.none:
        raise AdminError(response.error_message or error_name(response.error_code))
    return [
        (
            pattern_text(r.resource_type, r.resource_name, r.pattern_type),
            [entry_text(a.principal, a.host, a.operation, a.permission_type) for a in r.acls],
        )
        for r in response.resources
    ]


async def acls_list(args: argparse.Namespace) -> int:
    resources: list[Resource | None] = list(_resources(args)) or [None]
    async with KafkaClient(args.bootstrap) as client:
        for resource in resources:
            found = await _describe(
                client, resource, _pattern(args.resource_pattern_type), args.principal
            )
            for pattern, entries in found:
                _print_block("Current ACLs", pattern, entries)
    return 0


async def acls_add(args: argparse.Namespace) -> int:
    resources = _resources(args)
    pattern = _pattern(args.resource_pattern_type)
    if not resources:
        raise AclUsageError(
            "a resource is required: --topic, --group, --cluster or --transactional-id"
        )
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclUsageError("--resource-pattern-type must be literal or prefixed to add")
    entries = _entries(args, AclOperation.ALL, "*")
    if not entries:
        raise AclUsageError("--allow-principal or --deny-principal is required")
    async with KafkaClient(args.bootstrap) as client:
        for kind, name in resources:

            def build(b: Builder, version: int, kind: ResourceType = kind, name: str = name) -> Any:
                return b.CreateAclsRequest(
                    creations=tuple(
                        b.AclCreation(
                            resource_type=int(kind),
                            resource_name=name,
                            resource_pattern_type=int(pattern),
                            principal=principal or "",
                            host=host or "*",
                            operation=int(op),
                            permission_type=int(permission),
                        )
                        for principal, host, op, permission in entries
                    )
                )

            response = await client.call(CREATE_ACLS, build)
            for result in response.results:
                if result.error_code is not ErrorCode.none:
                    raise AdminError(result.error_message or error_name(result.error_code))
            resource_text = pattern_text(kind, name, pattern)
            _print_block(
                "Adding ACLs",
                resource_text,
                [entry_text(p or "", h or "*", op, perm) for p, h, op, perm in entries],
            )
            for found, current in await _describe(client, (kind, name), pattern):
                _print_block("Current ACLs", found, current)
    return 0


async def acls_remove(args: argparse.Namespace) -> int:
    resources = _resources(args)
    pattern = _pattern(args.resource_pattern_type)
    if not resources:
        raise AclUsageError(
            "a resource is required: --topic, --group, --cluster or --transactional-id"
        )
    entries: list[Entry] = _entries(args, AclOperation.ANY, None) or [
        (None, None, AclOperation.ANY, AclPermissionType.ANY)
    ]
    async with KafkaClient(args.bootstrap) as client:
        for kind, name in resources:

            def build(b: Builder, version: int, kind: ResourceType = kind, name: str = name) -> Any:
                return b.DeleteAclsRequest(
                    filters=tuple(
                        b.DeleteAclsFilter(
                            resource_type_filter=int(kind),
                            resource_name_filter=name,
                            pattern_type_filter=int(pattern),
                            principal_filter=principal,
                            host_filter=host,
                            operation=int(op),
                            permission_type=int(permission),
                        )
                        for principal, host, op, permission in entries
                    )
                )

            response = await client.call(DELETE_ACLS, build)
            removed = []
            for result in response.filter_results:
                if result.error_code is not ErrorCode.none:
                    raise AdminError(result.error_message or error_name(result.error_code))
                removed += [
                    entry_text(a.principal, a.host, a.operation, a.permission_type)
                    for a in result.matching_acls
                ]
            _print_block("Removing ACLs", pattern_text(kind, name, pattern), removed)
    return 0
