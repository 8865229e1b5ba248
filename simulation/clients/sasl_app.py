"""A client on a SASL listener with ACLs, under the nemesis (issue 33).

The cluster gets a second listener, ``SASL_PLAINTEXT`` (SCRAM-SHA-256 and PLAIN), and Kafka's
``StandardAuthorizer`` (`broker_configs`). Three client nodes, each on the simulated network
so that partitions and restarts hit them:

- ``sasl-admin`` sets things up over the wire as an operator would, on the PLAINTEXT
  listener: the client's SCRAM-SHA-256 credential (AlterUserScramCredentials, salted here
  from a salt the seed draws, as Kafka's admin client does), then its ACLs (CreateAcls):
  WRITE, DESCRIBE and READ on `TOPIC`, READ on the group `GROUP`, nothing on `FORBIDDEN`.
  Mid-run it removes the WRITE ACL (DeleteAcls) and later adds it back (CreateAcls), noting
  the window in which the ACL was certainly gone (`SaslEvents.revoked`).
- ``sasl-app`` logs in with SCRAM-SHA-256 on every new connection (`RawCluster`'s
  ``authenticate``: a restarted broker or a healed partition means a new login), its
  client nonce drawn from the seeded ``Random`` the workload hands it. It produces one
  record per acks=all Produce to `TOPIC` (never retried: a value is sent once), consumes
  `TOPIC` as a simple consumer of `GROUP` (OffsetFetch, Fetch, OffsetCommit with no
  generation), and now and then asks for `FORBIDDEN` (Produce and Fetch).
- ``sasl-intruder`` logs in with a wrong password, SCRAM-SHA-256 for the client's user and
  PLAIN for the JAAS user `PLAIN_USER` in turn, and then asks for Metadata on the same
  connection: Kafka answers SASL_AUTHENTICATION_FAILED and closes it.

Why ``super.users=User:ANONYMOUS`` rather than ``allow.everyone.if.no.acl.found``: the
PLAINTEXT listener's connections (aiokafka, our own members, followers, the marker sender)
are ``User:ANONYMOUS``, and naming it a super user is what Kafka deployments do for the
inter-broker principal: they keep working unchanged, with no ACL. ``allow.everyone`` would
instead allow the SASL principal everything on a resource without ACLs -- `FORBIDDEN` would
not be forbidden, and the check that it never is served could not fail.
"""

from __future__ import annotations

import asyncio
import base64
import math
import random
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.authorizer.acl import (
    STANDARD_AUTHORIZER,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from broker.security.sasl import PLAIN, SCRAM_SHA_256
from broker.security.sasl_client import scram_exchange
from broker.security.scram import MECHANISM_TYPES, MIN_ITERATIONS, salted_password
from client_io import ClientShell
from protocol.builders import request_builder
from protocol.record_builder import build_record_batch
from simulation.clients.raw import RawCluster, RawError
from simulation.clients.records import data_records
from simulation.clients.sasl_history import (
    NO_ANSWER,
    ForbiddenAsk,
    SaslEvents,
    SaslLogin,
    SaslSend,
)
from simulation.history import History
from virtual_time.determinism import DEFAULT_EPOCH_S

__all__ = ["FORBIDDEN", "TOPIC", "broker_configs", "sasl_clients"]

LISTENER = "SASL_PLAINTEXT"
TOPIC, FORBIDDEN, GROUP = "sim-sasl", "sim-sasl-forbidden", "sim-sasl-group"
USER, PASSWORD = "sim-sasl", "sim-sasl-secret"
PLAIN_USER, PLAIN_PASSWORD = "sim-plain", "sim-plain-secret"
PRINCIPAL = f"User:{USER}"
PRODUCE, FETCH, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 3, 8, 9
SASL_HANDSHAKE, SASL_AUTHENTICATE, CREATE_ACLS, DELETE_ACLS, ALTER_SCRAM = 17, 36, 30, 31, 51
TIMEOUT_S = 10.0


def broker_configs() -> dict[str, str]:
    """The SASL listener beside the PLAINTEXT one, and the authorizer (see the module doc)."""
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:0,{LISTENER}://127.0.0.1:0",
        "sasl.enabled.mechanisms": f"{SCRAM_SHA_256},{PLAIN}",
        f"listener.name.{LISTENER.lower()}.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
        ),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS",
    }


class SaslRefused(ConnectionError):
    """The broker answered a SASL step with an error."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


async def sasl_login(
    shell: ClientShell, mechanism: str, user: str, password: str, rng: random.Random
) -> None:
    """SaslHandshake v1 + SaslAuthenticate v2 on ``shell``; `SaslRefused` when refused."""
    b = request_builder(SASL_HANDSHAKE, 1)
    handshake: Any = (
        await shell.request(
            SASL_HANDSHAKE, 1, b.SaslHandshakeRequest(mechanism=mechanism), TIMEOUT_S
        )
    ).body
    if handshake.error_code is not ErrorCode.none:
        raise SaslRefused(handshake.error_code)

    async def send(token: bytes) -> bytes:
        request = request_builder(SASL_AUTHENTICATE, 2).SaslAuthenticateRequest(auth_bytes=token)
        answer: Any = (await shell.request(SASL_AUTHENTICATE, 2, request, TIMEOUT_S)).body
        if answer.error_code is not ErrorCode.none:
            raise SaslRefused(answer.error_code)
        return bytes(answer.auth_bytes)

    if mechanism == PLAIN:
        await send(f"\x00{user}\x00{password}".encode())
        return
    nonce = base64.b64encode(rng.randbytes(18)).decode()  # the seed's, as the broker's
    await scram_exchange(send, mechanism, user, password, nonce)


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "none"
    if isinstance(exc, SaslRefused):
        return exc.error.name
    return NO_ANSWER


def sasl_clients(
    *,
    bootstrap: str,
    sasl_bootstrap: str,
    now_s: float,
    stop_at_s: float,
    history: History,
    rng: random.Random,
) -> list[tuple[str, Any]]:
    """(client node name, coroutine) of the admin, the SASL client and the intruder."""
    events = history.protocol.sasl
    events.topic, events.forbidden_topic, events.principal = TOPIC, FORBIDDEN, PRINCIPAL
    ready = asyncio.Event()
    span = stop_at_s - now_s
    admin = SaslAdmin(bootstrap, events, random.Random(rng.random()), ready)
    app = SaslApp(sasl_bootstrap, history, random.Random(rng.random()), stop_at_s)
    intruder_rng = random.Random(rng.random())
    return [
        ("sasl-admin", admin.run(now_s + 0.4 * span, now_s + 0.6 * span)),
        ("sasl-app", app.run(ready)),
        ("sasl-intruder", intrude(sasl_bootstrap, events, intruder_rng, stop_at_s, ready)),
    ]


class SaslAdmin:
    """The operator: credentials and ACLs at the start, WRITE revoked and given back."""

    def __init__(
        self, bootstrap: str, events: SaslEvents, rng: random.Random, ready: asyncio.Event
    ) -> None:
        self._cluster = RawCluster(bootstrap, "sim-sasl-admin", timeout_s=TIMEOUT_S)
        self._events = events
        self._rng = rng
        self._ready = ready

    async def run(self, revoke_at_s: float, restore_at_s: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            await self._until_ok(self._set_credential)
            await self._until_ok(lambda: self._create_acls(_ACLS))
            self._ready.set()
            await asyncio.sleep(max(0.0, revoke_at_s - loop.time()))
            await self._until_ok(self._delete_write)
            revoked_at = loop.time()
            await asyncio.sleep(max(0.0, restore_at_s - loop.time()))
            self._events.revoked.append((revoked_at, loop.time()))
            await self._until_ok(lambda: self._create_acls(_ACLS[:1]))
        finally:
            await self._cluster.close()

    async def _until_ok(self, step: Callable[[], Any]) -> None:
        """Retry ``step`` until it is answered without an error (a lost answer's step may
        have been applied: every step here is idempotent)."""
        while True:
            try:
                if await step():
                    return
            except RawError:
                pass
            await asyncio.sleep(1.0)

    async def _set_credential(self) -> bool:
        salt = self._rng.randbytes(16)
        salted = salted_password(SCRAM_SHA_256, PASSWORD.encode(), salt, MIN_ITERATIONS)
        b = request_builder(ALTER_SCRAM, 0)
        answer = await self._cluster.call(
            -1, ALTER_SCRAM, 0, "AlterUserScramCredentialsRequest", deletions=(),
            upsertions=(b.ScramCredentialUpsertion(
                name=USER, mechanism=MECHANISM_TYPES[SCRAM_SHA_256], iterations=MIN_ITERATIONS,
                salt=salt, salted_password=salted,
            ),),
        )  # fmt: skip
        return all(r.error_code is ErrorCode.none for r in answer.results)

    async def _create_acls(self, acls: tuple[tuple[ResourceType, str, AclOperation], ...]) -> bool:
        b = request_builder(CREATE_ACLS, 3)
        answer = await self._cluster.call(
            -1, CREATE_ACLS, 3, "CreateAclsRequest",
            creations=tuple(b.AclCreation(
                resource_type=int(kind), resource_name=name,
                resource_pattern_type=int(PatternType.LITERAL), principal=PRINCIPAL, host="*",
                operation=int(op), permission_type=int(AclPermissionType.ALLOW),
            ) for kind, name, op in acls),
        )  # fmt: skip
        return all(r.error_code is ErrorCode.none for r in answer.results)

    async def _delete_write(self) -> bool:
        b = request_builder(DELETE_ACLS, 3)
        answer = await self._cluster.call(
            -1, DELETE_ACLS, 3, "DeleteAclsRequest",
            filters=(b.DeleteAclsFilter(
                resource_type_filter=int(ResourceType.TOPIC), resource_name_filter=TOPIC,
                pattern_type_filter=int(PatternType.LITERAL), principal_filter=PRINCIPAL,
                host_filter="*", operation=int(AclOperation.WRITE),
                permission_type=int(AclPermissionType.ALLOW),
            ),),
        )  # fmt: skip
        return all(r.error_code is ErrorCode.none for r in answer.filter_results)


#: The client's ACLs: WRITE first (the one revoked and given back).
_ACLS: tuple[tuple[ResourceType, str, AclOperation], ...] = (
    (ResourceType.TOPIC, TOPIC, AclOperation.WRITE),
    (ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE),
    (ResourceType.TOPIC, TOPIC, AclOperation.READ),
    (ResourceType.GROUP, GROUP, AclOperation.READ),
)


class SaslApp:
    """The SCRAM-SHA-256 client: produce, consume with its group, try the forbidden topic."""

    def __init__(
        self, bootstrap: str, history: History, rng: random.Random, stop_at_s: float
    ) -> None:
        self._history = history
        self._events = history.protocol.sasl
        self._rng = rng
        self._stop_at_s = stop_at_s
        self._cluster = RawCluster(
            bootstrap, "sim-sasl-app", timeout_s=TIMEOUT_S, authenticate=self._login
        )
        self._leaders: dict[int, int] = {}
        self._positions: dict[int, int] | None = None

    async def _login(self, shell: ClientShell) -> None:
        at = asyncio.get_running_loop().time()
        error: BaseException | None = None
        try:
            await sasl_login(shell, SCRAM_SHA_256, USER, PASSWORD, self._rng)
        except (ConnectionError, TimeoutError, OSError) as exc:
            error = exc
            raise
        finally:
            self._events.logins.append(
                SaslLogin("sasl-app", SCRAM_SHA_256, True, at, _outcome(error))
            )

    async def run(self, ready: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        await ready.wait()
        n = 0
        try:
            while loop.time() < self._stop_at_s:
                n += 1
                await self._step(n)
                await asyncio.sleep(self._rng.expovariate(2.0))
        finally:
            await self._cluster.close()

    async def _step(self, n: int) -> None:
        try:
            if not self._leaders:
                self._leaders = await self._cluster.leaders(TOPIC)
            if self._leaders:
                await self._produce(n)
                if n % 3 == 0:
                    await self._consume()
            if n % 5 == 0:
                await self._forbidden(n)
        except RawError as exc:
            self._leaders = {}
            self._history.client_errors[f"sasl-app {exc}"] += 1

    async def _produce(self, n: int) -> None:
        loop = asyncio.get_running_loop()
        partitions = sorted(self._leaders)
        partition = partitions[n % len(partitions)]
        value = b"sasl-%d" % n
        sent = loop.time()
        try:
            found = await self._produce_to(self._leaders[partition], TOPIC, partition, value)
        except RawError:
            self._events.sends.append(SaslSend(TOPIC, partition, value, sent, math.inf, NO_ANSWER))
            raise
        error = found.error_code.name
        offset = int(found.base_offset) if found.error_code is ErrorCode.none else None
        self._events.sends.append(
            SaslSend(TOPIC, partition, value, sent, loop.time(), error, offset)
        )
        if offset is not None:
            self._history.acked_all[(TOPIC, partition, offset)] = value
        elif found.error_code is not ErrorCode.topic_authorization_failed:
            self._leaders = {}

    async def _produce_to(self, broker: int, topic: str, partition: int, value: bytes) -> Any:
        stamp = int((DEFAULT_EPOCH_S + asyncio.get_running_loop().time()) * 1000)
        batch = build_record_batch([(None, value, ())], timestamp_ms=stamp)
        b = request_builder(PRODUCE, 9)
        answer = await self._cluster.call(
            broker, PRODUCE, 9, "ProduceRequest", transactional_id=None, acks=-1, timeout=10_000,
            topic_data=(b.TopicProduceData(name=topic, partition_data=(
                b.PartitionProduceData(index=partition, records=batch),)),),
        )  # fmt: skip
        return answer.responses[0].partition_responses[0]

    async def _fetch(self, broker: int, topic: str, positions: dict[int, int]) -> Any:
        b = request_builder(FETCH, 12)
        answer = await self._cluster.call(
            broker, FETCH, 12, "FetchRequest", max_wait=100, min_bytes=1, max_bytes=1 << 20,
            isolation_level=0, forgotten_topics_data=(),
            topics=(b.FetchTopic(topic=topic, partitions=tuple(
                b.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 16)
                for p, o in sorted(positions.items())
            )),),
        )  # fmt: skip
        return answer

    async def _forbidden(self, n: int) -> None:
        """A Produce and a Fetch on the topic the principal may not touch, to some broker
        (Kafka authorizes before it asks who leads)."""
        loop = asyncio.get_running_loop()
        brokers = sorted(set(self._leaders.values())) or [-1]
        broker = brokers[n % len(brokers)]
        sent = loop.time()
        found = await self._produce_to(broker, FORBIDDEN, 0, b"forbidden-%d" % n)
        self._events.forbidden.append(ForbiddenAsk("Produce", broker, sent, found.error_code.name))
        sent = loop.time()
        answer = await self._fetch(broker, FORBIDDEN, {0: 0})
        errors = [p.error_code for t in answer.responses for p in t.partitions]
        if answer.error_code is not ErrorCode.none:
            errors = [answer.error_code]
        for error in errors:
            self._events.forbidden.append(ForbiddenAsk("Fetch", broker, sent, error.name))

    async def _consume(self) -> None:
        """A simple consumer of GROUP: its committed offsets, one Fetch per leader, a commit."""
        coordinator = await self._cluster.coordinator(GROUP, 0)
        if self._positions is None:
            self._positions = await self._committed(coordinator)
            if self._positions is None:
                return
        by_leader: dict[int, dict[int, int]] = {}
        for partition, broker in sorted(self._leaders.items()):
            by_leader.setdefault(broker, {})[partition] = self._positions.get(partition, 0)
        for broker, positions in sorted(by_leader.items()):
            self._read(await self._fetch(broker, TOPIC, positions), positions)
        await self._commit(coordinator)

    def _read(self, answer: Any, positions: dict[int, int]) -> None:
        assert self._positions is not None
        for topic in answer.responses:
            for data in topic.partitions:
                partition = int(data.partition_index)
                if data.error_code is not ErrorCode.none:
                    self._history.client_errors[f"sasl-app fetch {data.error_code.name}"] += 1
                    self._leaders = {}
                    continue
                records = data_records(data.records)
                for offset in sorted(o for o in records if o >= positions[partition]):
                    value = records[offset]
                    if value is not None:
                        self._history.read("sasl-app", TOPIC, partition, offset, value)
                        self._events.reads.append((partition, offset, value))
                    self._positions[partition] = offset + 1

    async def _committed(self, coordinator: int) -> dict[int, int] | None:
        b = request_builder(OFFSET_FETCH, 8)
        answer = await self._cluster.call(
            coordinator, OFFSET_FETCH, 8, "OffsetFetchRequest", require_stable=True,
            groups=(b.OffsetFetchRequestGroup(group_id=GROUP, topics=(b.OffsetFetchRequestTopics(
                name=TOPIC, partition_indexes=tuple(sorted(self._leaders))
            ),)),),
        )  # fmt: skip
        group = answer.groups[0]
        if group.error_code is not ErrorCode.none:
            self._history.client_errors[f"sasl-app offset fetch {group.error_code.name}"] += 1
            return None
        found: dict[int, int] = {}
        for topic in group.topics:
            for p in topic.partitions:
                if p.error_code is not ErrorCode.none:
                    self._history.client_errors[f"sasl-app offset fetch {p.error_code.name}"] += 1
                    return None
                found[int(p.partition_index)] = max(0, int(p.committed_offset))
        return found

    async def _commit(self, coordinator: int) -> None:
        assert self._positions is not None
        b = request_builder(OFFSET_COMMIT, 8)
        answer = await self._cluster.call(
            coordinator, OFFSET_COMMIT, 8, "OffsetCommitRequest", group_id=GROUP,
            generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=(b.OffsetCommitRequestTopic(name=TOPIC, partitions=tuple(
                b.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_metadata=None
                ) for p, o in sorted(self._positions.items())
            )),),
        )  # fmt: skip
        errors = {p.error_code for t in answer.topics for p in t.partitions}
        for error in sorted(errors - {ErrorCode.none}, key=lambda e: e.name):
            self._history.client_errors[f"sasl-app commit {error.name}"] += 1
            self._positions = None  # ask the group again next time


async def intrude(
    bootstrap: str,
    events: SaslEvents,
    rng: random.Random,
    stop_at_s: float,
    ready: asyncio.Event,
) -> None:
    """Wrong passwords, SCRAM-SHA-256 and PLAIN in turn, each on a new connection, then a
    Metadata request on that connection: it must never be answered."""
    loop = asyncio.get_running_loop()
    addresses = [a.rpartition(":") for a in bootstrap.split(",")]
    await ready.wait()
    n = 0
    while loop.time() < stop_at_s:
        n += 1
        host, _, port = addresses[rng.randrange(len(addresses))]
        mechanism, user = (SCRAM_SHA_256, USER) if n % 2 else (PLAIN, PLAIN_USER)
        try:
            shell = await ClientShell.open(
                host, int(port), client_id="sim-sasl-intruder", timeout_s=TIMEOUT_S
            )
        except (ConnectionError, OSError):
            shell = None
        if shell is not None:
            await _intrude_once(shell, mechanism, user, events, rng)
        await asyncio.sleep(rng.uniform(2.0, 6.0))


async def _intrude_once(
    shell: ClientShell, mechanism: str, user: str, events: SaslEvents, rng: random.Random
) -> None:
    at = asyncio.get_running_loop().time()
    error: BaseException | None = None
    served = False
    try:
        await sasl_login(shell, mechanism, user, "not-" + PASSWORD, rng)
    except (ConnectionError, TimeoutError, OSError) as exc:
        error = exc
    if isinstance(error, SaslRefused) or error is None:
        served = await _metadata_answered(shell)
    shell.abort()
    events.logins.append(SaslLogin("sasl-intruder", mechanism, False, at, _outcome(error), served))


async def _metadata_answered(shell: ClientShell) -> bool:
    b = request_builder(METADATA, 12)
    request = b.MetadataRequest(
        topics=(b.MetadataRequestTopic(topic_id=None, name=TOPIC),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    try:
        await shell.request(METADATA, 12, request, TIMEOUT_S)
    except (ConnectionError, TimeoutError, OSError):
        return False
    return True
