"""``minikafka topics``, ``minikafka groups`` and ``minikafka quotas``: what ``kafka-topics.sh``,
``kafka-consumer-groups.sh`` and ``kafka-configs.sh``'s quota forms do, with their messages and
table columns (see ``kafka_tools/admin_cli.py``).

``topics create|list|describe|delete`` (a tiered topic's partitions with their local log
start, tiered offset and local size: ``admin_tiered.py``);
``groups list|describe|reset-offsets|delete`` (a KIP-848 consumer group is described by
``admin_consumer_groups.py``, a share group by ``admin_share_groups.py``);
``quotas describe|alter`` with ``--user``/``--client`` entities (DescribeClientQuotas,
AlterClientQuotas)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.admin_consumer_groups import (
    ConsumerGroupView,
    describe_consumer_group,
    member_rows,
    owners,
    state_rows,
    type_filter,
    type_label,
)
from kafka_tools.admin_share_groups import describe_share_group, print_share_group
from kafka_tools.admin_streams_groups import describe_streams_group, print_streams_group
from kafka_tools.admin_tiered import is_tiered, tier_fields
from kafka_tools.client import (
    EARLIEST,
    LATEST,
    AdminError,
    KafkaClient,
    decode_assignment,
    error_name,
    kafka_uuid,
)
from kafka_tools.client.cluster import (
    CREATE_TOPICS,
    DELETE_GROUPS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
)
from protocol.builders import Builder

TOPIC_RESOURCE = 2
DYNAMIC_TOPIC_CONFIG = 1


class UsageError(Exception):
    """A bad argument found after parsing (exit 2)."""


# -- topics -------------------------------------------------------------------------------


def _controller(client: KafkaClient) -> int | None:
    """Where topic changes go: the controller Metadata names (KRaft brokers forward
    them anyway), else any broker."""
    controller = client.cluster.controller
    return controller if controller in client.cluster.brokers else None


def _parse_configs(items: Sequence[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--config expects KEY=VALUE, got {item!r}")
        configs[key.strip()] = value.strip()
    return configs


async def topics_create(args: argparse.Namespace) -> int:
    configs = _parse_configs(args.config)
    if args.partitions == 0 or args.partitions < -1:
        raise UsageError(f"--partitions must be at least 1, not {args.partitions}")
    if args.replication_factor == 0 or args.replication_factor < -1:
        raise UsageError(f"--replication-factor must be at least 1, not {args.replication_factor}")
    async with KafkaClient(args.bootstrap) as client:

        def build(b: Builder, version: int) -> Any:
            return b.CreateTopicsRequest(
                topics=(
                    b.CreatableTopic(
                        name=args.topic,
                        num_partitions=args.partitions,
                        replication_factor=args.replication_factor,
                        assignments=(),
                        configs=tuple(
                            b.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()
                        ),
                    ),
                ),
                timeout=30000,
                validate_only=False,
            )

        response = await client.call(CREATE_TOPICS, build, _controller(client))
        (result,) = response.topics
        error = result.error_code
        if error is ErrorCode.topic_already_exists and args.if_not_exists:
            return 0
        if error is not ErrorCode.none:
            message = result.error_message or error_name(error)
            raise AdminError(f"Error while executing topic command : {message}")
        print(f"Created topic {args.topic}.")
        return 0


async def topics_list(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:
        cluster = await client.refresh_metadata(None)
        for name in sorted(cluster.topics):
            if args.exclude_internal and cluster.topics[name].internal:
                continue
            print(name)
    return 0


async def topics_describe(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:
        wanted = list(args.topics)
        cluster = await client.refresh_metadata(wanted or None)
        names = sorted(wanted or cluster.topics)
        missing = [
            n
            for n in names
            if n not in cluster.topics
            or cluster.topics[n].error is ErrorCode.unknown_topic_or_partition
        ]
        if missing:
            raise AdminError(f"Topic '{missing[0]}' does not exist")
        names = [n for n in names if not (args.exclude_internal and cluster.topics[n].internal)]
        overrides = await _topic_overrides(client, names)
        for name in names:
            view = cluster.topics[name]
            partitions = [view.partitions[p] for p in sorted(view.partitions)]
            rf = len(partitions[0].replicas) if partitions else 0
            configs = ",".join(f"{k}={v}" for k, v in sorted(overrides.get(name, {}).items()))
            tiers: dict[int, str] = {}
            if is_tiered(overrides.get(name, {})):
                leaders = {p.partition: p.leader for p in partitions}
                tiers = await tier_fields(client, name, leaders)
            print(
                f"Topic: {name}\tTopicId: {kafka_uuid(view.topic_id)}\t"
                f"PartitionCount: {len(partitions)}\tReplicationFactor: {rf}\tConfigs: {configs}"
            )
            for p in partitions:
                leader = "none" if p.leader < 0 else str(p.leader)
                print(
                    f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {leader}\t"
                    f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
                    f"{tiers.get(p.partition, '')}"
                )
    return 0


async def _topic_overrides(client: KafkaClient, names: Sequence[str]) -> dict[str, dict[str, str]]:
    """Each topic's own configs (Kafka's describe shows only those)."""
    if not names:
        return {}

    def build(b: Builder, version: int) -> Any:
        return b.DescribeConfigsRequest(
            resources=tuple(
                b.DescribeConfigsResource(
                    resource_type=TOPIC_RESOURCE, resource_name=n, configuration_keys=None
                )
                for n in names
            ),
            include_synonyms=False,
            include_documentation=False,
        )

    response = await client.call(DESCRIBE_CONFIGS, build)
    result: dict[str, dict[str, str]] = {}
    for resource in response.results:
        if resource.error_code is not ErrorCode.none:
            continue
        result[str(resource.resource_name)] = {
            str(c.name): "" if c.value is None else str(c.value)
            for c in resource.configs
            if int(getattr(c, "config_source", -1)) == DYNAMIC_TOPIC_CONFIG
        }
    return result


async def topics_delete(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:

        def build(b: Builder, version: int) -> Any:
            return b.DeleteTopicsRequest(
                topics=(b.DeleteTopicState(name=args.topic, topic_id=None),)
                if version >= 6
                else None,
                topic_names=(args.topic,),
                timeout=30000,
            )

        response = await client.call(DELETE_TOPICS, build, _controller(client))
        (result,) = response.responses
        error = result.error_code
        if error is ErrorCode.unknown_topic_or_partition and args.if_exists:
            return 0
        if error is ErrorCode.unknown_topic_or_partition:
            raise AdminError(f"Topic '{args.topic}' does not exist")
        if error is not ErrorCode.none:
            message = getattr(result, "error_message", None) or error_name(error)
            raise AdminError(f"Error while executing topic command : {message}")
        print(f"Deleted topic {args.topic}.")
    return 0


# -- groups -------------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = [" ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append(" ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


async def _all_groups(client: KafkaClient) -> dict[str, tuple[str, str]]:
    """group id -> (state, type), from every broker (each lists the groups it
    coordinates); the type (classic, consumer) from ListGroups v5, "" before."""
    groups: dict[str, tuple[str, str]] = {}
    for broker in sorted(client.cluster.brokers):

        def build(b: Builder, version: int) -> Any:
            if version >= 5:
                return b.ListGroupsRequest(states_filter=(), types_filter=())
            return b.ListGroupsRequest(states_filter=())

        try:
            response = await client.call(LIST_GROUPS, build, broker)
        except (OSError, ConnectionError):
            client.forget(broker)
            continue
        if response.error_code is not ErrorCode.none:
            continue
        for group in response.groups:
            groups[str(group.group_id)] = (
                str(getattr(group, "group_state", "") or ""),
                str(getattr(group, "group_type", "") or ""),
            )
    return groups


async def groups_list(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:
        groups = await _all_groups(client)
    types = type_filter(args.type) if args.type is not None else set()
    names = sorted(g for g in groups if not types or groups[g][1] in types)
    if args.state or args.type is not None:
        headers = ["GROUP"]
        if args.type is not None:
            headers.append("TYPE")
        if args.state:
            headers.append("STATE")
        rows = []
        for g in names:
            state, group_type = groups[g]
            row = [g]
            if args.type is not None:
                row.append(type_label(group_type))
            if args.state:
                row.append(state or "-")
            rows.append(row)
        print(_table(headers, rows))
    else:
        for group in names:
            print(group)
    return 0


async def _describe_group(client: KafkaClient, group: str) -> tuple[int, Any]:
    coordinator = await client.find_coordinator(group)

    def build(b: Builder, version: int) -> Any:
        return b.DescribeGroupsRequest(groups=(group,), include_authorized_operations=False)

    response = await client.call(DESCRIBE_GROUPS, build, coordinator)
    (described,) = response.groups
    if described.error_code is not ErrorCode.none:
        raise AdminError(f"DescribeGroups {group}: {error_name(described.error_code)}")
    return coordinator, described


async def groups_describe(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:
        groups = [*args.groups, *args.group_option]
        if args.all_groups:
            groups = sorted(set(groups) | set(await _all_groups(client)))
        if not groups:
            raise UsageError("name a group (or --all-groups)")
        missing = 0
        for number, group in enumerate(groups):
            if number:
                print()
            coordinator = await client.find_coordinator(group)
            consumer_group = await describe_consumer_group(client, group, coordinator)
            if consumer_group is not None:
                await _describe_consumer_group(client, args, consumer_group, coordinator)
                continue
            streams_group = await describe_streams_group(client, group, coordinator)
            if streams_group is not None:  # KIP-1071 (kafka_tools/admin_streams_groups.py)
                print_streams_group(client, args, streams_group, coordinator, _table)
                continue
            share_group = await describe_share_group(client, group, coordinator)
            if share_group is not None:  # KIP-932 (kafka_tools/admin_share_groups.py)
                print_share_group(client, args, share_group, coordinator, _table)
                continue
            coordinator, described = await _describe_group(client, group)
            state = str(described.group_state)
            members = list(described.members)
            if args.state:
                host, port = client.cluster.brokers.get(coordinator, ("?", 0))
                print(
                    _table(
                        ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                        [
                            (
                                group,
                                f"{host}:{port} ({coordinator})",
                                described.protocol_data or "",
                                state,
                                len(members),
                            )
                        ],
                    )
                )
                continue
            committed = await client.committed_offsets(group, coordinator)
            if state == "Dead" and not committed:
                print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
                missing += 1
                continue
            if not members:
                print(f"Consumer group '{group}' has no active members.\n")
            elif state in ("PreparingRebalance", "CompletingRebalance"):
                print(f"Warning: Consumer group '{group}' is rebalancing.\n")
            if args.members:
                rows = []
                for m in members:
                    assigned = decode_assignment(bytes(m.member_assignment or b""))
                    text = ",".join(
                        f"{t}({','.join(map(str, ps))})" for t, ps in sorted(assigned.items())
                    )
                    count = sum(len(ps) for ps in assigned.values())
                    rows.append(
                        (group, m.member_id, m.client_host, m.client_id, count, text or "-")
                    )
                print(
                    _table(
                        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                        rows,
                    )
                )
                continue
            owner: dict[tuple[str, int], Sequence[str]] = {}
            for described_member in members:
                assignment = decode_assignment(bytes(described_member.member_assignment or b""))
                for topic, assigned_partitions in assignment.items():
                    for index in assigned_partitions:
                        owner[(topic, index)] = (
                            described_member.member_id,
                            described_member.client_host,
                            described_member.client_id,
                        )
            await _print_offsets(client, group, owner, committed)
        return 1 if missing else 0


async def _print_offsets(
    client: KafkaClient,
    group: str,
    owner: dict[tuple[str, int], Sequence[str]],
    committed: dict[tuple[str, int], int],
) -> None:
    """Kafka's offsets view: each partition's committed offset, end, lag and owner."""
    tps = sorted(set(owner) | set(committed))
    ends = await client.list_offsets(tps, LATEST) if tps else {}
    offset_rows: list[tuple[object, ...]] = []
    for tp in tps:
        current = committed.get(tp, -1)
        end = ends.get(tp, -1)
        lag = end - current if current >= 0 and end >= 0 else "-"
        holder = owner.get(tp, ("-", "-", "-"))
        offset_rows.append(
            (
                group,
                tp[0],
                tp[1],
                current if current >= 0 else "-",
                end if end >= 0 else "-",
                lag,
                *holder,
            )
        )
    headers = [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    print(_table(headers, offset_rows))


async def _describe_consumer_group(
    client: KafkaClient, args: argparse.Namespace, view: ConsumerGroupView, coordinator: int
) -> None:
    """A KIP-848 consumer group's views (``kafka_tools/admin_consumer_groups.py``)."""
    group = view.group_id
    if args.state:
        host, port = client.cluster.brokers.get(coordinator, ("?", 0))
        print(_table(*state_rows(view, f"{host}:{port} ({coordinator})", args.verbose)))
        return
    if not view.members:
        print(f"Consumer group '{group}' has no active members.\n")
    elif view.state in ("Assigning", "Reconciling"):
        print(f"Warning: Consumer group '{group}' is rebalancing.\n")
    if args.members:
        print(_table(*member_rows(view, args.verbose)))
        return
    committed = await client.committed_offsets(group, coordinator)
    await _print_offsets(client, group, dict(owners(view)), committed)


def _reset_scope(items: Sequence[str]) -> list[tuple[str, list[int] | None]]:
    scope: list[tuple[str, list[int] | None]] = []
    for item in items:
        topic, sep, parts = item.partition(":")
        if not topic:
            raise UsageError(f"--topic expects TOPIC or TOPIC:P,P..., got {item!r}")
        if not sep:
            scope.append((topic, None))
            continue
        try:
            scope.append((topic, [int(p) for p in parts.split(",") if p.strip()]))
        except ValueError:
            raise UsageError(f"--topic {item!r}: partitions must be numbers") from None
    return scope


async def groups_reset_offsets(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:
        coordinator, described = await _describe_group(client, args.group)
        state = str(described.group_state)
        if state not in ("Empty", "Dead"):
            raise AdminError(
                f"Assignments can only be reset if the group '{args.group}' is inactive, "
                f"but the current state is {state}."
            )
        committed = await client.committed_offsets(args.group, coordinator)
        partitions: list[tuple[str, int]] = []
        if args.all_topics:
            partitions = sorted(committed)
        else:
            for topic, chosen in _reset_scope(args.topics):
                view = await client.partitions_of(topic)
                for p in chosen if chosen is not None else sorted(view.partitions):
                    if p not in view.partitions:
                        raise AdminError(f"topic {topic!r} has no partition {p}")
                    partitions.append((topic, p))
        if not partitions:
            raise AdminError(f"group '{args.group}' has no offsets to reset (name --topic)")
        earliest = await client.list_offsets(partitions, EARLIEST)
        latest = await client.list_offsets(partitions, LATEST)
        new: dict[tuple[str, int], int] = {}
        for tp in partitions:
            if args.to_earliest:
                target = earliest[tp]
            elif args.to_latest:
                target = latest[tp]
            elif args.to_offset is not None:
                target = args.to_offset
            else:
                base = committed.get(tp, -1)
                if base < 0:
                    raise AdminError(
                        f"--shift-by: group '{args.group}' has no offset for {tp[0]}-{tp[1]}"
                    )
                target = base + args.shift_by
            new[tp] = min(max(target, earliest[tp]), latest[tp])  # Kafka clamps to the log
        if args.execute:
            await client.commit_offsets(args.group, coordinator, new)
        elif not args.dry_run:
            print(
                "minikafka groups reset-offsets: dry run: nothing committed "
                "(--execute commits; --dry-run says this is intended)",
                file=sys.stderr,
            )
        rows = [(args.group, t, p, o) for (t, p), o in sorted(new.items())]
        print(_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows))
    return 0


async def groups_delete(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:
        failed = 0
        for group in args.groups:
            coordinator = await client.find_coordinator(group)

            def build(b: Builder, version: int, group: str = group) -> Any:
                return b.DeleteGroupsRequest(groups_names=(group,))

            response = await client.call(DELETE_GROUPS, build, coordinator)
            (result,) = response.results
            if result.error_code is ErrorCode.none:
                print(f"Deletion of requested consumer groups ('{group}') was successful.")
            else:
                failed += 1
                print(
                    f"Deletion of some consumer groups failed: '{group}': "
                    f"{error_name(result.error_code)}",
                    file=sys.stderr,
                )
    return 1 if failed else 0


# -- quotas (kafka-configs.sh --entity-type users/clients) -------------------------------

_QUOTA_TYPES = (("user", "user-principal"), ("client-id", "client-id"), ("ip", "ip"))


def quota_entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """``--user U``/``--user-defaults``, ``--client C``/``--client-defaults``: the entity
    as (type, name or None for the default), users first as Kafka's tool orders them."""
    entity: list[tuple[str, str | None]] = []
    if args.user is not None and args.user_defaults:
        raise UsageError("--user and --user-defaults are exclusive")
    if args.client is not None and args.client_defaults:
        raise UsageError("--client and --client-defaults are exclusive")
    if args.user is not None or args.user_defaults:
        entity.append(("user", args.user))
    if args.client is not None or args.client_defaults:
        entity.append(("client-id", args.client))
    return entity


def _quota_filter(b: Builder, entity: Sequence[tuple[str, str | None]]) -> tuple[Any, ...]:
    return tuple(
        b.ComponentData(entity_type=kind, match_type=0 if name is not None else 1, match=name)
        for kind, name in entity
    )


async def _describe_quotas(
    client: KafkaClient, entity: Sequence[tuple[str, str | None]]
) -> list[tuple[dict[str, str | None], list[tuple[str, float]]]]:
    def build(b: Builder, version: int) -> Any:
        return b.DescribeClientQuotasRequest(
            components=_quota_filter(b, entity), strict=bool(entity)
        )

    response = await client.call(48, build)
    if response.error_code is not ErrorCode.none:
        raise AdminError(response.error_message or error_name(response.error_code))
    return [
        (
            {e.entity_type: e.entity_name for e in entry.entity},
            [(v.key, float(v.value)) for v in entry.values],
        )
        for entry in response.entries or ()
    ]


def _quota_line(entity: dict[str, str | None], values: Sequence[tuple[str, float]]) -> str:
    parts = []
    for kind, label in _QUOTA_TYPES:
        if kind in entity:
            name = entity[kind]
            parts.append(f"{label} '{name}'" if name is not None else f"the default {label}")
    entries = ", ".join(f"{key}={value}" for key, value in values)
    return f"Quota configs for {', '.join(parts)} are {entries}"


async def quotas_describe(args: argparse.Namespace) -> int:
    """``kafka-configs.sh --describe --entity-type users|clients``: one line an entity."""
    entity = quota_entity(args)
    async with KafkaClient(args.bootstrap) as client:
        for found, values in await _describe_quotas(client, entity):
            print(_quota_line(found, values))
    return 0


def _parse_quota_values(items: Sequence[str]) -> dict[str, float]:
    values: dict[str, float] = {}
    for item in ",".join(items).split(","):
        if not item.strip():
            continue
        key, sep, text = item.partition("=")
        if not sep:
            raise UsageError(f"--add-config expects KEY=VALUE[,KEY=VALUE], got {item!r}")
        try:
            values[key.strip()] = float(text)
        except ValueError:
            raise UsageError(
                f"Cannot parse quota configuration value for {key.strip()}: {text}"
            ) from None
    return values


async def quotas_alter(args: argparse.Namespace) -> int:
    """``kafka-configs.sh --alter --add-config k=v --delete-config k`` on a quota entity."""
    entity = quota_entity(args)
    if not entity:
        raise UsageError(
            "an entity is required: --user/--user-defaults and/or --client/--client-defaults"
        )
    added = _parse_quota_values(args.add_config)
    deleted = [k.strip() for item in args.delete_config for k in item.split(",") if k.strip()]
    if not added and not deleted:
        raise UsageError("nothing to alter: give --add-config and/or --delete-config")
    async with KafkaClient(args.bootstrap) as client:
        if deleted:
            current = await _describe_quotas(client, entity)
            keys = {key for _, values in current for key, _ in values}
            invalid = [key for key in deleted if key not in keys]
            if invalid:
                raise AdminError(f"Invalid config(s): {','.join(invalid)}")

        def build(b: Builder, version: int) -> Any:
            ops = [b.OpData(key=k, value=v, remove=False) for k, v in added.items()]
            ops += [b.OpData(key=k, value=0.0, remove=True) for k in deleted]
            return b.AlterClientQuotasRequest(
                entries=(
                    b.EntryData(
                        entity=tuple(b.EntityData(entity_type=k, entity_name=n) for k, n in entity),
                        ops=tuple(ops),
                    ),
                ),
                validate_only=False,
            )

        response = await client.call(49, build)
        (result,) = response.entries
        if result.error_code is not ErrorCode.none:
            raise AdminError(result.error_message or error_name(result.error_code))
    kind, name = entity[0]
    plural = "users" if kind == "user" else "clients"
    if name is not None:
        print(f"Completed updating config for {plural[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {plural} in the cluster.")
    return 0
