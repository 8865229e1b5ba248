"""The cluster's client-metrics subscriptions (CLIENT_METRICS resources), durable.

Kafka keeps a subscription as a config resource in the metadata log and each broker's
``ClientMetricsManager`` is told of every change (``updateSubscription``), bumping a
version so that a client's next request re-evaluates its subscription. Here one store
per cluster is shared by its brokers (as ``GroupConfigStore`` is), durable in
``client-metrics.json`` in the data directory (``atomic_file``), and its ``version``
moves with every change; each broker's manager compares it with the version its client
instances were built at.

``alter`` is IncrementalAlterConfigs on one resource: SET, DELETE, APPEND and SUBTRACT
(the last two on the LIST configs ``metrics`` and ``match``; on ``interval.ms``
INVALID_CONFIG, as Kafka's controller answers), then the resulting set is validated
whole (``client_metrics_configs.validate``). A change that leaves no config removes the
subscription, as Kafka does when every config of it is deleted. ``replace`` is the
legacy AlterConfigs: the configs given become the whole set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from kio.schema.errors import ErrorCode

from broker.cluster.atomic_file import read_json, write_json_atomic
from broker.cluster.cluster_metadata import MetadataError
from broker.observability.client_telemetry.client_metrics_configs import (
    LIST_CONFIGS,
    Subscription,
    split_list,
    subscription,
    validate,
)

FILE_NAME = "client-metrics.json"

# IncrementalAlterConfigs' operations (Kafka's AlterConfigOp.OpType ids).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATION_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


class ClientMetricsStore:
    """Every subscription's configs, cluster-wide; durable in ``client-metrics.json``."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._path = data_dir / FILE_NAME if data_dir is not None else None
        self._configs: dict[str, dict[str, str]] = {}
        document = read_json(self._path) if self._path is not None else None
        if document is not None:
            self._configs = {
                str(name): {str(k): str(v) for k, v in configs.items()}
                for name, configs in document.get("subscriptions", {}).items()
            }
        self._subscriptions = {n: subscription(n, c) for n, c in self._configs.items()}
        #: Moves with every change (Kafka's ``subscriptionUpdateVersion``).
        self.version = 0

    def names(self) -> list[str]:
        """The subscriptions by name (ListConfigResources, ``--list``)."""
        return sorted(self._configs)

    def configs(self, name: str) -> dict[str, str]:
        """What was set on the subscription (nothing for one that does not exist)."""
        return dict(self._configs.get(name, {}))

    def subscriptions(self) -> list[Subscription]:
        """Every subscription, parsed, by name."""
        return [self._subscriptions[name] for name in sorted(self._subscriptions)]

    def alter(
        self,
        name: str,
        changes: Sequence[tuple[str, str | None, int]],
        validate_only: bool = False,
    ) -> None:
        """Apply IncrementalAlterConfigs ``(config, value, operation)`` changes to one
        subscription; ``MetadataError`` with Kafka's code and message when refused."""
        configs = self.configs(name)
        for key, value, operation in changes:
            if operation == SET:
                configs[key] = value or ""
            elif operation == DELETE:
                configs.pop(key, None)
            elif operation in (APPEND, SUBTRACT):
                if key not in LIST_CONFIGS:
                    raise MetadataError(
                        ErrorCode.invalid_config,
                        f"Can't {_OPERATION_NAMES[operation]} to key {key} because its type "
                        "is not LIST.",
                    )
                items = split_list(configs.get(key))
                given = split_list(value)
                if operation == APPEND:
                    items.extend(item for item in given if item not in items)
                else:
                    items = [item for item in items if item not in given]
                configs[key] = ",".join(items)
            else:
                raise MetadataError(
                    ErrorCode.invalid_request, f"Unknown operations type {operation} for {key}"
                )
        validate(name, configs)
        if not validate_only:
            self.put(name, configs)

    def replace(self, name: str, configs: Mapping[str, str], validate_only: bool = False) -> None:
        """The legacy AlterConfigs: ``configs`` become the subscription's whole set
        (none: it is removed), validated first."""
        validate(name, configs)
        if not validate_only:
            self.put(name, configs)

    def put(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the subscription's configs (none: remove it), save, move the version."""
        if configs:
            self._configs[name] = dict(configs)
            self._subscriptions[name] = subscription(name, configs)
        elif name in self._configs:
            del self._configs[name]
            del self._subscriptions[name]
        else:
            return
        self.version += 1
        if self._path is not None:
            write_json_atomic(self._path, {"version": 1, "subscriptions": self._configs}, indent=1)
