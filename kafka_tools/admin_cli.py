"""``minikafka topics|groups|quotas|acls|features|metadata-quorum|client-metrics|produce|
consume``: Kafka's command line tools, against any bootstrap.

=====================================  ==============================================
Kafka                                  minikafka
=====================================  ==============================================
``kafka-topics.sh --create``           ``topics create TOPIC --partitions N
                                       --replication-factor R --config k=v``
``kafka-topics.sh --list``             ``topics list``
``kafka-topics.sh --describe``         ``topics describe [TOPIC ...]``
``kafka-topics.sh --delete``           ``topics delete TOPIC``
``kafka-consumer-groups.sh --list``    ``groups list [--state] [--type [TYPES]]``
``kafka-consumer-groups.sh
--describe``                           ``groups describe GROUP [--members | --state] [--verbose]``
``kafka-consumer-groups.sh
--reset-offsets``                      ``groups reset-offsets --group G --topic T
                                       --to-earliest|--to-latest|--to-offset N|
                                       --shift-by N [--dry-run|--execute]``
``kafka-consumer-groups.sh --delete``  ``groups delete GROUP``
``kafka-configs.sh --describe
--entity-type users|clients``          ``quotas describe [--user U|--user-defaults]
                                       [--client C|--client-defaults]``
``kafka-configs.sh --alter
--add-config k=v --delete-config k``   ``quotas alter --user U|--client C ...
                                       --add-config k=v[,k=v] --delete-config k``
``kafka-acls.sh --add|--list|--remove``  ``acls add|list|remove --topic T|--group G|--cluster
                                       --allow-principal P --operation OP ...``
                                       (``admin_acls.py``)
``kafka-features.sh``                  ``features describe|upgrade|downgrade
                                       --feature F=N ...`` (``admin_features.py``)
``kafka-metadata-quorum.sh describe    ``metadata-quorum describe --status|--replication``
|add-controller|remove-controller``    ``metadata-quorum add-controller|remove-controller
                                       --controller-id ID ...``
                                       (``admin_metadata_quorum.py``)
``kafka-client-metrics.sh``            ``client-metrics list|describe|alter|delete
                                       --name N --metrics M --interval MS --match K=V``
                                       (``admin_client_metrics.py``)
``kafka-console-producer.sh``          ``produce TOPIC [--key-separator SEP]``
``kafka-console-consumer.sh``          ``consume TOPIC [--from-beginning] [--group G]
                                       [--max-messages N] [--timeout-ms MS]``
=====================================  ==============================================

Every command takes ``--bootstrap-server HOST:PORT[,...]`` (also ``--bootstrap``;
default ``$MINIKAFKA_BOOTSTRAP`` or ``127.0.0.1:9092``). Output follows Kafka's tools
(the same messages and table columns), so what a Kafka user reads is familiar.
Exit codes: 0 done, 1 the cluster refused or could not be reached (one line on stderr
says why), 2 a bad argument. The client underneath is ``kafka_tools/client/``:
``protocol.client`` only, so the base install is enough.

Where this differs from Kafka's tools: ``reset-offsets`` without ``--execute`` is a dry
run, as in Kafka, with a one-line note; ``consume --timeout-ms`` ends with exit 0 (Kafka
logs a TimeoutException); ``consume`` with ``--group`` commits exactly what it printed,
on exit and every 5 s, where Kafka's auto-commit commits what it fetched.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from kafka_tools.admin_acls import AclUsageError, acls_add, acls_list, acls_remove, add_acl_parsers
from kafka_tools.admin_client_metrics import (
    ClientMetricsUsageError,
    add_client_metrics_parsers,
    client_metrics_alter,
    client_metrics_delete,
    client_metrics_describe,
    client_metrics_list,
)
from kafka_tools.admin_commands import (
    UsageError,
    groups_delete,
    groups_describe,
    groups_list,
    groups_reset_offsets,
    quotas_alter,
    quotas_describe,
    topics_create,
    topics_delete,
    topics_describe,
    topics_list,
)
from kafka_tools.admin_features import (
    FeatureUsageError,
    add_feature_parsers,
    features_describe,
    features_downgrade,
    features_upgrade,
)
from kafka_tools.admin_metadata_quorum import (
    QuorumUsageError,
    add_metadata_quorum_parsers,
    metadata_quorum_add_controller,
    metadata_quorum_describe,
    metadata_quorum_remove_controller,
)
from kafka_tools.client import AdminError
from kafka_tools.console_commands import consume_records, produce_lines

__all__ = ["ADMIN_COMMANDS", "add_admin_parsers", "run_admin"]

ADMIN_COMMANDS = frozenset(
    {
        "topics",
        "groups",
        "quotas",
        "acls",
        "features",
        "metadata-quorum",
        "client-metrics",
        "produce",
        "consume",
    }
)
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


# -- parsers ------------------------------------------------------------------------------


def _bootstrap_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        "--bootstrap",
        dest="bootstrap",
        default=os.environ.get("MINIKAFKA_BOOTSTRAP", DEFAULT_BOOTSTRAP),
        metavar="HOST:PORT[,...]",
        help=f"brokers to connect to (env MINIKAFKA_BOOTSTRAP; {DEFAULT_BOOTSTRAP})",
    )


def _topic_argument(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("topic", nargs="?", default=None, help="topic name")
    parser.add_argument("--topic", dest="topic_option", default=None, help=argparse.SUPPRESS)
    parser.set_defaults(topic_required=required)


def add_admin_parsers(sub: Any) -> None:
    """Add ``topics``, ``groups``, ``produce`` and ``consume`` to ``minikafka``'s parser."""
    topics = sub.add_parser("topics", help="create, list, describe, delete topics (kafka-topics)")
    actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a topic")
    _topic_argument(create)
    create.add_argument(
        "--partitions", type=int, default=-1, help="partitions (the broker's num.partitions)"
    )
    create.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        help="replicas per partition (the broker's default.replication.factor)",
    )
    create.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config, e.g. retention.ms=60000 (repeatable)",
    )
    create.add_argument("--if-not-exists", action="store_true", help="no error if it exists")
    _bootstrap_option(create)
    listing = actions.add_parser("list", help="list topic names")
    listing.add_argument("--exclude-internal", action="store_true", help="leave out __ topics")
    _bootstrap_option(listing)
    describe = actions.add_parser("describe", help="partitions, leaders, replicas, ISR, configs")
    describe.add_argument("topics", nargs="*", help="topics (all when none)")
    describe.add_argument("--topic", dest="topic_option", default=None, help=argparse.SUPPRESS)
    describe.add_argument("--exclude-internal", action="store_true", help="leave out __ topics")
    _bootstrap_option(describe)
    delete = actions.add_parser("delete", help="delete a topic")
    _topic_argument(delete)
    delete.add_argument("--if-exists", action="store_true", help="no error if it does not exist")
    _bootstrap_option(delete)

    groups = sub.add_parser(
        "groups", help="list, describe, reset offsets of consumer groups (kafka-consumer-groups)"
    )
    actions = groups.add_subparsers(dest="action", required=True, metavar="ACTION")
    glist = actions.add_parser("list", help="list consumer groups")
    glist.add_argument("--state", action="store_true", help="show each group's state")
    glist.add_argument(
        "--type",
        nargs="?",
        const="",
        default=None,
        metavar="TYPES",
        help="show each group's type (classic, consumer); only these types if named",
    )
    _bootstrap_option(glist)
    gdescribe = actions.add_parser(
        "describe", help="offsets and lag per partition (--members, --state for other views)"
    )
    gdescribe.add_argument("groups", nargs="*", help="group ids")
    gdescribe.add_argument("--group", dest="group_option", action="append", default=[])
    gdescribe.add_argument("--all-groups", action="store_true", help="every group")
    view = gdescribe.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="members and their assignments")
    view.add_argument("--state", action="store_true", help="coordinator, strategy, state")
    view.add_argument("--offsets", action="store_true", help="offsets and lag (the default)")
    gdescribe.add_argument(
        "--verbose", action="store_true", help="epochs and assignments (consumer groups)"
    )
    _bootstrap_option(gdescribe)
    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets")
    reset.add_argument("--group", required=True, help="group id")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        action="append",
        dest="topics",
        default=None,
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument("--all-topics", action="store_true", help="every topic it has offsets of")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start")
    target.add_argument("--to-latest", action="store_true", help="the log end")
    target.add_argument("--to-offset", type=int, default=None, metavar="N", help="offset N")
    target.add_argument("--shift-by", type=int, default=None, metavar="N", help="committed + N")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    _bootstrap_option(reset)
    gdelete = actions.add_parser("delete", help="delete consumer groups (no active members)")
    gdelete.add_argument("groups", nargs="+", help="group ids")
    _bootstrap_option(gdelete)

    _add_quota_parsers(sub)
    add_acl_parsers(sub, _bootstrap_option)
    add_feature_parsers(sub, _bootstrap_option)
    add_metadata_quorum_parsers(sub, _bootstrap_option)
    add_client_metrics_parsers(sub, _bootstrap_option)

    prod = sub.add_parser(
        "produce", help="send the lines of stdin as records (kafka-console-producer)"
    )
    _topic_argument(prod)
    prod.add_argument(
        "--key-separator",
        default=None,
        metavar="SEP",
        help="each line is KEY SEP VALUE (Kafka's parse.key=true, key.separator=SEP)",
    )
    prod.add_argument(
        "--acks", default="all", choices=["all", "-1", "0", "1"], help="acks (all, as Kafka)"
    )
    prod.add_argument("--partition", type=int, default=None, help="this partition only")
    prod.add_argument(
        "--timeout-ms", type=int, default=30000, help="produce request timeout (30000)"
    )
    _bootstrap_option(prod)

    cons = sub.add_parser("consume", help="print a topic's records (kafka-console-consumer)")
    _topic_argument(cons)
    cons.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (with --group: when it has no committed offset)",
    )
    cons.add_argument("--group", default=None, help="consume as a member of this group")
    cons.add_argument("--max-messages", type=int, default=None, help="stop after N records")
    cons.add_argument(
        "--timeout-ms", type=int, default=None, help="stop when no record came for this long"
    )
    cons.add_argument("--partition", type=int, default=None, help="this partition only")
    cons.add_argument(
        "--offset",
        default=None,
        help="earliest, latest or a number (with --partition; not with --group)",
    )
    cons.add_argument("--print-key", action="store_true", help="print KEY SEP VALUE")
    cons.add_argument(
        "--key-separator", default="\t", metavar="SEP", help="between key and value (a tab)"
    )
    _bootstrap_option(cons)


def _quota_entity_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", default=None, metavar="U", help="a user principal's name")
    parser.add_argument("--user-defaults", action="store_true", help="the default user")
    parser.add_argument("--client", default=None, metavar="C", help="a client id")
    parser.add_argument("--client-defaults", action="store_true", help="the default client id")
    _bootstrap_option(parser)


def _add_quota_parsers(sub: Any) -> None:
    quotas = sub.add_parser(
        "quotas",
        help="describe and alter client quotas (kafka-configs --entity-type users/clients)",
    )
    actions = quotas.add_subparsers(dest="action", required=True, metavar="ACTION")
    describe = actions.add_parser("describe", help="the quotas of an entity, or all")
    _quota_entity_options(describe)
    alter = actions.add_parser("alter", help="set (--add-config) or remove (--delete-config)")
    _quota_entity_options(alter)
    alter.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="K=V[,K=V]",
        help="producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate",
    )
    alter.add_argument(
        "--delete-config", action="append", default=[], metavar="K[,K]", help="keys to remove"
    )


# -- running ------------------------------------------------------------------------------


def run_admin(
    args: argparse.Namespace, runner: Callable[[Callable[[], Coroutine[Any, Any, int]]], int]
) -> int:
    """Run one admin command; returns the exit code."""
    prog = f"minikafka {args.command}" + (f" {args.action}" if hasattr(args, "action") else "")
    commands: dict[str, Callable[[argparse.Namespace], Coroutine[Any, Any, int]]] = {
        "topics create": topics_create,
        "topics list": topics_list,
        "topics describe": topics_describe,
        "topics delete": topics_delete,
        "groups list": groups_list,
        "groups describe": groups_describe,
        "groups reset-offsets": groups_reset_offsets,
        "groups delete": groups_delete,
        "quotas describe": quotas_describe,
        "quotas alter": quotas_alter,
        "acls add": acls_add,
        "acls list": acls_list,
        "acls remove": acls_remove,
        "features describe": features_describe,
        "features upgrade": features_upgrade,
        "features downgrade": features_downgrade,
        "metadata-quorum describe": metadata_quorum_describe,
        "metadata-quorum add-controller": metadata_quorum_add_controller,
        "metadata-quorum remove-controller": metadata_quorum_remove_controller,
        "client-metrics list": client_metrics_list,
        "client-metrics describe": client_metrics_describe,
        "client-metrics alter": client_metrics_alter,
        "client-metrics delete": client_metrics_delete,
        "produce": produce_lines,
        "consume": consume_records,
    }
    command = commands[prog.removeprefix("minikafka ")]
    try:
        _resolve_topic(args)
        return runner(lambda: command(args))
    except (
        UsageError,
        AclUsageError,
        FeatureUsageError,
        QuorumUsageError,
        ClientMetricsUsageError,
    ) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except AdminError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    except (OSError, ConnectionError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1


def _resolve_topic(args: argparse.Namespace) -> None:
    option = getattr(args, "topic_option", None)
    if hasattr(args, "topics") and isinstance(args.topics, list) and args.command == "topics":
        if option:
            args.topics.append(option)
        return
    if not hasattr(args, "topic_required"):
        return
    if args.topic and option and args.topic != option:
        raise UsageError(f"two topics given: {args.topic} and --topic {option}")
    args.topic = args.topic or option
    if args.topic_required and not args.topic:
        raise UsageError("a topic is required")
