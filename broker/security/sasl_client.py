"""The broker as a client of another broker's TLS/SASL listener (``inter.broker.listener.name``).

Followers' fetches and the transaction coordinator's WriteTxnMarkers go to the
inter-broker listener and authenticate like any client, as in Kafka: TLS with the
listener's truststore (and its keystore as the client certificate when the listener asks
for one), then SaslHandshake v1 + SaslAuthenticate v2 with
``sasl.mechanism.inter.broker.protocol`` (PLAIN, SCRAM-SHA-256/512) as the user of the
listener's JAAS entry for that mechanism (``username``/``password`` options, Kafka's
broker-side login). ``InterBrokerClient.authenticate`` runs the exchange over any
request function, so the connection code stays one (``broker/replica/leader_endpoint.py``);
``scram_exchange`` is SCRAM's client side alone, which the tests and tools also use to log
in with a delegation token (``tokenauth=true``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.sasl import PLAIN
from broker.security.scram import SCRAM_MECHANISMS, salted_password
from protocol.builders import request_builder

Request = Callable[[int, int, Any], Awaitable[Any]]


class InterBrokerAuthenticationError(ConnectionError):
    """The other broker refused this broker's credentials."""


@dataclass(frozen=True)
class InterBrokerClient:
    listener_name: str
    ssl_context: ssl.SSLContext | None
    mechanism: str | None
    random_bytes: Callable[[int], bytes]  # SCRAM's client nonce
    username: str = ""
    password: str = ""

    async def authenticate(self, request: Request) -> None:
        """SaslHandshake + SaslAuthenticate over ``request``; raises when refused."""
        mechanism = self.mechanism
        if mechanism is None:
            return
        handshake = await request(
            17, 1, request_builder(17, 1).SaslHandshakeRequest(mechanism=mechanism)
        )
        if handshake.error_code != ErrorCode.none:
            raise InterBrokerAuthenticationError(
                f"SaslHandshake {mechanism}: {handshake.error_code}"
            )
        if mechanism == PLAIN:
            await self._token(request, f"\x00{self.username}\x00{self.password}".encode())
            return
        nonce = base64.b64encode(self.random_bytes(18)).decode()
        await self._scram(request, mechanism, nonce)

    async def _token(self, request: Request, token: bytes) -> bytes:
        response = await request(
            36, 2, request_builder(36, 2).SaslAuthenticateRequest(auth_bytes=token)
        )
        if response.error_code != ErrorCode.none:
            raise InterBrokerAuthenticationError(str(response.error_message))
        return bytes(response.auth_bytes)

    async def _scram(self, request: Request, mechanism: str, nonce: str) -> None:
        async def send(token: bytes) -> bytes:
            return await self._token(request, token)

        await scram_exchange(send, mechanism, self.username, self.password, nonce)


async def scram_exchange(
    send: Callable[[bytes], Awaitable[bytes]],
    mechanism: str,
    username: str,
    password: str,
    nonce: str,
    extensions: str = "",
) -> None:
    """RFC 5802's client side over ``send`` (one token out, the server's challenge back);
    ``extensions`` (``tokenauth=true`` for a delegation token, KIP-48) go after the nonce
    of the client-first message. Raises ``InterBrokerAuthenticationError`` when the server
    does not prove it knows the credential."""
    hash_name = SCRAM_MECHANISMS[mechanism]
    user = username.replace("=", "=3D").replace(",", "=2C")
    first_bare = f"n={user},r={nonce}" + (f",{extensions}" if extensions else "")
    server_first = (await send(f"n,,{first_bare}".encode())).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    if not fields.get("r", "").startswith(nonce):
        raise InterBrokerAuthenticationError("SCRAM: the server changed the client nonce")
    salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}"
    server_final = (await send(final.encode())).decode()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    expected = base64.b64encode(hmac.new(server_key, auth_message, hash_name).digest())
    if server_final != f"v={expected.decode()}":
        raise InterBrokerAuthenticationError("SCRAM: the server's signature does not verify")
