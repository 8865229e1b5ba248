"""The one explicit list of APIs this broker serves; ApiVersions is built from it.

Adding an API means writing its module and adding it here. The versions served are the
module's own range, clipped to what kio can decode, so we never advertise a version we
cannot read. Every module answers for its API: ``handle`` and ``error_response`` are
required, ``topic_partitions`` is there when the API's requests name topics.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

from broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    add_raft_voter,
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_delegation_token,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_share_group_state,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_delegation_token,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    expire_delegation_token,
    fetch,
    find_coordinator,
    get_telemetry_subscriptions,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    initialize_share_group_state,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    push_telemetry,
    read_share_group_state,
    read_share_group_state_summary,
    remove_raft_voter,
    renew_delegation_token,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    streams_group_describe,
    streams_group_heartbeat,
    sync_group,
    txn_offset_commit,
    unregister_broker,
    update_features,
    write_share_group_state,
    write_txn_markers,
)
from broker.handlers.base import ApiHandler
from protocol.api_registry import KIO_VERSIONS, ApiSpec, api_name

HANDLER_MODULES: tuple[ModuleType, ...] = (
    produce,
    fetch,
    list_offsets,
    metadata,
    api_versions,
    create_topics,
    delete_topics,
    delete_records,
    init_producer_id,
    describe_configs,
    create_partitions,
    describe_cluster,
    alter_configs,
    incremental_alter_configs,
    find_coordinator,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    offset_for_leader_epoch,
    describe_producers,
    # the admin surface (issue 11): ACLs without an authorizer, log dirs, elections,
    # reassignments, paged topic descriptions
    describe_acls,
    create_acls,
    delete_acls,
    describe_log_dirs,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    describe_topic_partitions,
    # transactions (issue 11): the transaction coordinator (broker/txn/), the markers,
    # transactional offset commits
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    write_txn_markers,
    txn_offset_commit,
    describe_transactions,
    list_transactions,
    # Kafka 4's consumer group protocol (issue 19, KIP-848): broker/group/consumer/
    consumer_group_heartbeat,
    consumer_group_describe,
    # the KRaft controller quorum (issue 22): broker/cluster/kraft_quorum.py
    describe_quorum,
    # the control plane of Kafka 4.2 (issue 31): unregistering brokers, KIP-853 voters
    unregister_broker,
    add_raft_voter,
    remove_raft_voter,
    # finalized features (issue 31, KIP-584): broker/cluster/features.py
    update_features,
    # several log.dirs per broker (issue 22): broker/log/log_manager.py
    alter_replica_log_dirs,
    # client quotas (issue 22): broker/quota/
    describe_client_quotas,
    alter_client_quotas,
    # share groups (issue 20, KIP-932): broker/group/share/ and broker/share/
    share_group_heartbeat,
    share_group_describe,
    share_fetch,
    share_acknowledge,
    # the share coordinator (issue 20 phase 2, KIP-932): broker/share_coordinator/
    initialize_share_group_state,
    read_share_group_state,
    write_share_group_state,
    delete_share_group_state,
    read_share_group_state_summary,
    describe_share_group_offsets,
    alter_share_group_offsets,  # 91 and 92: issue 20, the admin gaps
    delete_share_group_offsets,
    # streams groups (issue 32, KIP-1071): broker/group/streams/
    streams_group_heartbeat,
    streams_group_describe,
    # security (issue 21): SASL is the authenticator's; these answer after it
    sasl_handshake,
    sasl_authenticate,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    # delegation tokens (issue 31, KIP-48): broker/security/delegation_token_manager.py
    create_delegation_token,
    renew_delegation_token,
    expire_delegation_token,
    describe_delegation_token,
    # the config resources of a type (issue 31, KIP-1142)
    list_config_resources,
)
#: Client telemetry (issue 32, KIP-714): served, and so advertised, only when the
#: receiver is on (``metric.reporters``), as Kafka's only with a telemetry plugin.
CLIENT_TELEMETRY_MODULES: tuple[ModuleType, ...] = (get_telemetry_subscriptions, push_telemetry)


def broker_registry(client_telemetry: bool) -> dict[int, ApiHandler]:
    """What a broker serves: every API, and client telemetry's when it is on."""
    extra = CLIENT_TELEMETRY_MODULES if client_telemetry else ()
    return build_registry(HANDLER_MODULES + extra)


def build_registry(modules: tuple[ModuleType, ...] = HANDLER_MODULES) -> dict[int, ApiHandler]:
    """Every module's API, checked: a module without a version in common with kio, or
    without its ``error_response``, is a RuntimeError."""
    registry: dict[int, ApiHandler] = {}
    for module in modules:
        key = int(module.API_KEY)
        spec = KIO_VERSIONS[key]
        low = max(int(module.MIN_VERSION), spec.min_version)
        high = min(int(module.MAX_VERSION), spec.max_version)
        if low > high:
            raise RuntimeError(f"{module.__name__}: no version in common with kio")
        if key in registry:
            raise RuntimeError(f"API key {key} registered twice")
        error_response = getattr(module, "error_response", None)
        if error_response is None:
            raise RuntimeError(f"{module.__name__}: no error_response")
        registry[key] = ApiHandler(
            key,
            api_name(key),
            low,
            high,
            module.handle,
            error_response,
            getattr(module, "topic_partitions", None),
        )
    return registry


def api_specs(registry: Mapping[int, ApiHandler]) -> tuple[ApiSpec, ...]:
    """What ApiVersions advertises: every registered API's range, by key."""
    return tuple(
        ApiSpec(h.api_key, h.name, h.min_version, h.max_version)
        for h in sorted(registry.values(), key=lambda h: h.api_key)
    )
