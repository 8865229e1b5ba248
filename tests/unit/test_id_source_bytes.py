"""`IdSource.random_bytes`, the entropy of SCRAM nonces and salts: a seed's repeat, the
system's do not, and a SCRAM server draws its nonce from what it is handed."""

from __future__ import annotations

import base64

from broker.ids import IdSource
from broker.security.sasl import SCRAM_SHA_256
from broker.security.scram import ScramSaslServer, generate_credential


def test_a_seed_gives_the_same_bytes_and_the_system_does_not() -> None:
    assert IdSource.seeded(7).random_bytes(18) == IdSource.seeded(7).random_bytes(18)
    assert IdSource.seeded(7).random_bytes(18) != IdSource.seeded(8).random_bytes(18)
    system = IdSource.system()
    assert len(system.random_bytes(18)) == 18
    assert system.random_bytes(18) != system.random_bytes(18)


def _server_first(ids: IdSource) -> str:
    credential = generate_credential(SCRAM_SHA_256, "pw", b"salt", 4096)
    server = ScramSaslServer(SCRAM_SHA_256, lambda user, mech: credential, ids.random_bytes)
    return server.evaluate_response(b"n,,n=alice,r=client-nonce").decode()


def test_the_scram_server_nonce_is_the_seeds() -> None:
    first = _server_first(IdSource.seeded(1))
    assert first == _server_first(IdSource.seeded(1)) != _server_first(IdSource.seeded(2))
    nonce = first.split(",")[0].removeprefix("r=client-nonce")
    assert nonce == base64.b64encode(IdSource.seeded(1).random_bytes(18)).decode()
