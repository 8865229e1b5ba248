"""The bytes on disk of every coordinator record type and version we write never change.

``tests/data/coordinator_records.json`` was written by the code before the coordinator
kit (commit 3785eb7) from the records in ``coordinator_record_cases``; it is never
regenerated. Each record encodes to the same bytes today, and the stored bytes decode
to the record; the versions we only read (``read_only:``) decode as Kafka defines them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit import coordinator_record_cases as cases

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "coordinator_records.json").read_text())


def _bytes(hex_or_none: str | None) -> bytes | None:
    return None if hex_or_none is None else bytes.fromhex(hex_or_none)


def test_every_case_has_golden_bytes() -> None:
    assert sorted(GOLDEN) == sorted(
        [*cases.ALL_CASES, *(f"read_only:{name}" for name in cases.READ_ONLY)]
    )


@pytest.mark.parametrize("name", cases.ALL_CASES)
def test_encodes_to_the_golden_bytes(name: str) -> None:
    key, value = cases.encode(name)
    golden_key, golden_value = GOLDEN[name]
    assert key.hex() == golden_key
    assert (None if value is None else value.hex()) == golden_value


@pytest.mark.parametrize("name", cases.ALL_CASES)
def test_golden_bytes_decode_to_the_record(name: str) -> None:
    key, value = GOLDEN[name]
    assert cases.decode(name, bytes.fromhex(key), _bytes(value)) == cases.expected_decoded(name)


@pytest.mark.parametrize("name", list(cases.READ_ONLY))
def test_versions_read_but_not_written_decode(name: str) -> None:
    key, value = GOLDEN[f"read_only:{name}"]
    _, expected = cases.READ_ONLY[name]
    assert cases.decode(name, bytes.fromhex(key), _bytes(value)) == expected()
