"""What a KIP-848 member and a share consumer of the mix have in common: their life.

`ProtocolMember` is the part of `ConsumerMember` and `ShareMember` that does not depend on
the group protocol:

- ``run``: incarnations until ``stop_at_s`` -- live (the subclass's ``_live``: a heartbeat
  task beside the consuming one); killed by its `MemberPlan`, wait ``restart_after_s`` and
  start again as a new member (a new member id drawn from the seed); at the end, leave;
- the heartbeat loop and one heartbeat's frame (find the coordinator, send, note an
  answer without an error for the checkers' leases, forget the coordinator on a retriable
  error, reset on fencing); the request and what an answer changes are the subclass's;
- ``_maybe_freeze``: the plan's one freeze (the member's network cut while it holds what
  it was given);
- ``_die`` and ``_leave``: connections dropped without a word, or the group left with
  member epoch -1 after the subclass gave up what it holds.

Each hook runs where the code it replaced ran, with the same awaits in the same order:
the simulation's digests do not move (a refactoring of issue 33's duplicate loops).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from protocol.builders import Builder
from simulation.clients.link import RETRIABLE_COORDINATOR, ClusterLink
from simulation.history import History

__all__ = ["FENCED", "MemberPlan", "ProtocolMember"]

FENCED = (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id)


@dataclass(frozen=True, slots=True)
class MemberPlan:
    """What the nemesis of the clients does to one member (times are virtual seconds)."""

    freeze_at_s: float | None = None
    frozen_s: float = 0.0
    kill_at_s: float | None = None
    restart_after_s: float = 15.0


class HeartbeatLog(Protocol):
    def heartbeat_ok(self, member: str, sent_s: float) -> None: ...


EventsT = TypeVar("EventsT", bound=HeartbeatLog)


class ProtocolMember(Generic[EventsT]):
    """A member's life; the subclass gives its protocol. See the module doc."""

    #: The heartbeat's API key (ConsumerGroupHeartbeat, ShareGroupHeartbeat), version 1.
    heartbeat_api: int
    _hb: ClusterLink
    _data: ClusterLink

    def __init__(
        self,
        *,
        bootstrap: str,
        group: str,
        topic: str,
        name: str,
        stop_at_s: float,
        history: History,
        events: EventsT,
        rng: random.Random,
        plan: MemberPlan,
    ) -> None:
        self._bootstrap = bootstrap
        self.group, self.topic, self.name = group, topic, name
        self._stop_at_s = stop_at_s
        self._history = history
        self._events = events
        self._rng = rng
        self._plan = plan
        self._loop = asyncio.get_running_loop()
        self._new_incarnation()

    def _new_incarnation(self) -> None:
        """A new member: its id from the seed; the subclass adds its state and its links
        (``_hb`` to the coordinator, ``_data`` to the leaders)."""
        self.member_id = str(uuid.UUID(int=self._rng.getrandbits(128)))
        self.epoch = 0
        self._heartbeat_s = 3.0
        self._coordinator: int | None = None
        self._frozen_once = False

    def _now(self) -> float:
        return self._loop.time()

    def _error(self, what: str) -> None:
        self._history.client_errors[f"{self.name} {what}"] += 1

    # -- the member's life ---------------------------------------------------------------

    async def run(self) -> None:
        plan = self._plan
        while self._now() < self._stop_at_s:
            dies_at = plan.kill_at_s if plan.kill_at_s and plan.kill_at_s > self._now() else None
            until = min(self._stop_at_s, dies_at or self._stop_at_s)
            await self._live(until)
            if dies_at is not None and self._now() < self._stop_at_s:
                self._die()
                await asyncio.sleep(plan.restart_after_s)
                self._new_incarnation()
                continue
            await self._leave()
            break

    async def _live(self, until_s: float) -> None:
        """Heartbeat and consume until ``until_s``."""
        raise NotImplementedError

    def _die(self) -> None:
        """Killed: connections dropped, no leave."""
        self._hb.close()
        self._data.close()
        self._killed()
        self._history.faults.append(f"{self._now():.3f}s kill member {self.name}")

    def _killed(self) -> None:
        """What the subclass notes of its death (its connections are closed)."""

    async def _leave(self) -> None:
        await self._let_go()
        if self.epoch > 0:
            self.epoch = -1
            with contextlib.suppress(ConnectionError):
                await self._heartbeat()
        self._hb.close()
        self._data.close()

    async def _let_go(self) -> None:
        """Before leaving: give up what the member holds."""

    # -- heartbeats ----------------------------------------------------------------------

    async def _heartbeats(self, until_s: float) -> None:
        while self._now() < until_s:
            again = False
            try:
                again = await self._heartbeat()
            except ConnectionError:
                self._coordinator = None
                self._error("heartbeat ConnectionError")
            if again:
                continue
            await asyncio.sleep(self._heartbeat_pause_s(until_s))

    def _heartbeat_pause_s(self, until_s: float) -> float:
        return self._heartbeat_s

    async def _heartbeat(self) -> bool:
        """One heartbeat; True when the next one is due at once."""
        if self._coordinator is None:
            await self._hb.refresh((self.topic,))
            self._coordinator = await self._hb.coordinator(self.group)
        build = self._heartbeat_request()
        sent = self._now()
        body, _ = await self._hb.call(self._coordinator, self.heartbeat_api, 1, build)
        error = body.error_code
        if self.epoch < 0:
            return False
        if error is ErrorCode.none:
            self._events.heartbeat_ok(self.member_id, sent)
            self._heartbeat_s = body.heartbeat_interval.total_seconds() or self._heartbeat_s
            return await self._heartbeat_answered(body)
        self._error(error.name)
        if error in FENCED:
            self._fenced()
        elif error in RETRIABLE_COORDINATOR:
            self._coordinator = None
        return False

    def _heartbeat_request(self) -> Callable[[Builder], Any]:
        """The heartbeat's request, from the member's state as it is now."""
        raise NotImplementedError

    async def _heartbeat_answered(self, body: Any) -> bool:
        """An answer without an error (noted, its interval taken): what it changes; True
        to heartbeat again at once."""
        raise NotImplementedError

    def _fenced(self) -> None:
        """FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: join again, from epoch 0."""
        self.epoch = 0

    # -- the nemesis's freeze, metadata --------------------------------------------------

    async def _maybe_freeze(self) -> None:
        plan = self._plan
        if self._frozen_once or plan.freeze_at_s is None or self._now() < plan.freeze_at_s:
            return
        self._frozen_once = True
        network = getattr(self._loop, "network", None)
        if network is not None:
            network.isolate(self.name)
        self._history.faults.append(f"{self._now():.3f}s freeze member {self.name}")
        await asyncio.sleep(plan.frozen_s)
        if network is not None:
            network.rejoin(self.name)
        self._history.faults.append(f"{self._now():.3f}s thaw member {self.name}")

    async def _refresh_quietly(self) -> None:
        try:
            await self._data.refresh((self.topic,))
        except ConnectionError:
            self._error("metadata ConnectionError")
