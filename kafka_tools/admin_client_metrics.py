"""``minikafka client-metrics list|describe|alter|delete``: ``kafka-client-metrics.sh``
(KIP-714's telemetry subscriptions, CLIENT_METRICS config resources) against any bootstrap.

=====================================================  ================================
Kafka                                                  minikafka
=====================================================  ================================
``kafka-client-metrics.sh --list``                     ``client-metrics list``
``kafka-client-metrics.sh --describe [--name N]``      ``client-metrics describe [--name N]``
``kafka-client-metrics.sh --alter --name N             ``client-metrics alter --name N
--metrics m1,m2 --interval MS --match k=v,k=v``        --metrics m1,m2 --interval MS
                                                       --match k=v,k=v``
``... --alter --generate-name``                        ``client-metrics alter --generate-name``
``kafka-client-metrics.sh --delete --name N``          ``client-metrics delete --name N``
=====================================================  ================================

As Kafka's tool: ``list`` reads ListConfigResources (CLIENT_METRICS) and prints one name
a line; ``describe`` prints "Client metrics configs for N are:" then ``  key=value`` for
each config set (every subscription without ``--name``); ``alter`` sends one
IncrementalAlterConfigs with a SET per option given (an empty value: DELETE) and prints
"Altered client metrics config for N."; ``delete`` deletes every config the subscription
has (which removes it) and prints "Deleted client metrics config for N.". A refusal is
one line on stderr with the broker's message and exit code 1.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client import AdminError, KafkaClient, error_name
from protocol.builders import Builder

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, LIST_CONFIG_RESOURCES = 32, 44, 74
CLIENT_METRICS = 16
SET, DELETE = 0, 1
SELECTORS = (
    "client_id",
    "client_instance_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)


class ClientMetricsUsageError(Exception):
    """A bad command line (exit code 2)."""


def add_client_metrics_parsers(sub: Any, bootstrap_option: Any) -> None:
    command = sub.add_parser(
        "client-metrics",
        help="list, describe, alter, delete client telemetry subscriptions (kafka-client-metrics)",
    )
    actions = command.add_subparsers(dest="action", required=True, metavar="ACTION")
    bootstrap_option(actions.add_parser("list", help="the client metrics resources"))
    describe = actions.add_parser("describe", help="a subscription's configs (or every one's)")
    describe.add_argument("--name", default=None, help="the subscription")
    bootstrap_option(describe)
    alter = actions.add_parser("alter", help="create or change a subscription")
    alter.add_argument("--name", default=None, help="the subscription")
    alter.add_argument("--generate-name", action="store_true", help="a UUID as the name")
    alter.add_argument("--metrics", default=None, metavar="m1,m2", help="metric name prefixes")
    alter.add_argument("--interval", type=int, default=None, help="push interval (ms)")
    alter.add_argument(
        "--match",
        default=None,
        metavar="k1=v1,k2=v2",
        help="selectors (regexes) over: " + ", ".join(SELECTORS),
    )
    bootstrap_option(alter)
    delete = actions.add_parser("delete", help="remove a subscription")
    delete.add_argument("--name", required=True, help="the subscription")
    bootstrap_option(delete)


async def client_metrics_list(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:
        for name in await _names(client):
            print(name)
    return 0


async def client_metrics_describe(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:
        names = [args.name] if args.name else await _names(client)
        for name in names:
            print(f"Client metrics configs for {name} are:")
            for key, value in await _configs(client, name):
                print(f"  {key}={value}")
    return 0


async def client_metrics_alter(args: argparse.Namespace) -> int:
    if bool(args.name) == bool(args.generate_name):
        raise ClientMetricsUsageError(
            "One of --name or --generate-name must be specified with --alter."
        )
    name = args.name or str(uuid.uuid4())
    configs: dict[str, str] = {}
    if args.interval is not None:
        configs["interval.ms"] = str(args.interval)
    if args.metrics is not None:
        configs["metrics"] = args.metrics
    if args.match is not None:
        configs["match"] = args.match
    async with KafkaClient(args.bootstrap) as client:
        await _alter(client, name, [(k, v, SET if v else DELETE) for k, v in configs.items()])
    print(f"Altered client metrics config for {name}.")
    return 0


async def client_metrics_delete(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:
        configs = await _configs(client, args.name)
        await _alter(client, args.name, [(key, None, DELETE) for key, _ in configs])
    print(f"Deleted client metrics config for {args.name}.")
    return 0


async def _names(client: KafkaClient) -> list[str]:
    def build(b: Builder, version: int) -> Any:
        return b.ListConfigResourcesRequest(resource_types=(CLIENT_METRICS,))

    response = await client.call(LIST_CONFIG_RESOURCES, build)
    if response.error_code is not ErrorCode.none:
        raise AdminError(f"ListConfigResources failed: {error_name(response.error_code)}")
    return sorted(
        r.resource_name
        for r in response.config_resources
        if int(getattr(r, "resource_type", CLIENT_METRICS)) == CLIENT_METRICS
    )


async def _configs(client: KafkaClient, name: str) -> list[tuple[str, str]]:
    def build(b: Builder, version: int) -> Any:
        return b.DescribeConfigsRequest(
            resources=(
                b.DescribeConfigsResource(
                    resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None
                ),
            ),
            include_synonyms=False,
            include_documentation=False,
        )

    response = await client.call(DESCRIBE_CONFIGS, build)
    (result,) = response.results
    if result.error_code is not ErrorCode.none:
        raise AdminError(result.error_message or error_name(result.error_code))
    return [(c.name, c.value or "") for c in result.configs]


async def _alter(
    client: KafkaClient, name: str, changes: list[tuple[str, str | None, int]]
) -> None:
    def build(b: Builder, version: int) -> Any:
        return b.IncrementalAlterConfigsRequest(
            resources=(
                b.AlterConfigsResource(
                    resource_type=CLIENT_METRICS,
                    resource_name=name,
                    configs=tuple(
                        b.AlterableConfig(name=k, config_operation=op, value=v)
                        for k, v, op in changes
                    ),
                ),
            ),
            validate_only=False,
        )

    response = await client.call(INCREMENTAL_ALTER_CONFIGS, build)
    (result,) = response.responses
    if result.error_code is not ErrorCode.none:
        raise AdminError(
            "Error while executing client metrics command : "
            + (result.error_message or error_name(result.error_code))
        )
