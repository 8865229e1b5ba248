"""The service-time model: fitted per API and size bucket, bounded, seeded, as a table."""

from __future__ import annotations

import json
import random

import pytest

from protocol.service_times import (
    QUANTILES,
    SIZE_BUCKET_BOUNDS,
    ServiceTimeDistribution,
    ServiceTimeFitter,
    ServiceTimeModel,
    fit_capture_records,
    size_bucket,
)
from tests.helpers.captures import make_event, make_request

PRODUCE, FETCH, METADATA = 0, 1, 3


def test_size_buckets_are_powers_of_sixteen_from_one_kib() -> None:
    assert size_bucket(None) is None
    assert size_bucket(0) == 0 and size_bucket(1023) == 0
    assert size_bucket(1024) == 1 and size_bucket(16383) == 1
    assert size_bucket(1 << 22) == len(SIZE_BUCKET_BOUNDS)


def test_a_distribution_is_its_inverse_cdf() -> None:
    dist = ServiceTimeDistribution(tuple(float(i) for i in range(QUANTILES)))
    assert dist.sample(0.0) == 0.0
    assert dist.sample(0.5) == pytest.approx(50.0)
    assert dist.sample(0.995) == pytest.approx(99.5)
    assert dist.sample(1.0) == 100.0
    assert ServiceTimeDistribution((0.3,)).sample(0.9) == 0.3


@pytest.mark.parametrize("bad", [(), (1.0, 0.5), (-1.0,), (float("nan"),)])
def test_a_distribution_refuses_what_no_broker_measures(bad: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        ServiceTimeDistribution(bad)


def test_the_fit_keeps_each_api_and_size_apart() -> None:
    fitter = ServiceTimeFitter(seed=1)
    for i in range(1000):
        fitter.add(PRODUCE, 200, 0.1 + (i % 10) * 0.01)  # small produce: 0.10..0.19
        fitter.add(PRODUCE, 500_000, 2.0 + (i % 10) * 0.1)  # big produce: 2.0..2.9
        fitter.add(FETCH, 100, 0.05)
    model = fitter.fit("test")
    assert model.service_ms(PRODUCE, 300, 0.0) == pytest.approx(0.1)
    assert model.service_ms(PRODUCE, 300, 1.0) == pytest.approx(0.19)
    assert model.service_ms(PRODUCE, 600_000, 0.5) == pytest.approx(2.45)
    assert model.service_ms(FETCH, 100, 0.7) == pytest.approx(0.05)
    # A size never seen: the API over every size. An API never seen: everything.
    assert 0.1 <= model.service_ms(PRODUCE, 20_000, 0.5) <= 2.9
    assert model.distribution(METADATA, 10) is model.default
    assert model.default.samples == 3000


def test_a_thin_bucket_falls_back_to_its_api() -> None:
    fitter = ServiceTimeFitter(min_samples=20)
    for _ in range(100):
        fitter.add(PRODUCE, 100, 0.2)
    for _ in range(5):
        fitter.add(PRODUCE, 100_000, 9.0)
    model = fitter.fit()
    assert model.distribution(PRODUCE, 100_000) is model.by_api[PRODUCE]


def _exponential_fit(seed: int, reservoir: int = 64) -> ServiceTimeFitter:
    fitter = ServiceTimeFitter(seed=seed, reservoir=reservoir)
    values = random.Random(99)
    for i in range(20_000):
        fitter.add(FETCH, 100 + i, values.expovariate(10.0))
    return fitter


def test_memory_is_bounded_and_the_fit_is_seeded() -> None:
    fitter = _exponential_fit(3)
    reservoirs = [*fitter._by_api.values(), *fitter._by_bucket.values(), fitter._all]
    assert all(len(r.values) <= 64 for r in reservoirs)
    first = fitter.fit()
    assert first.by_api[FETCH].samples == 20_000
    assert len(first.by_api[FETCH].quantiles_ms) == QUANTILES
    assert _exponential_fit(3).fit() == first
    assert _exponential_fit(4).fit() != first
    # a uniform sample of an exponential of mean 0.1 ms: its median is near ln 2 / 10
    median = _exponential_fit(3, reservoir=4096).fit().by_api[FETCH].quantile(0.5)
    assert median == pytest.approx(0.0693, rel=0.1)


def test_fit_from_capture_records_reads_local_time_and_size() -> None:
    records = [make_request(api_key=PRODUCE, request_size=300, local_time_ms=0.4)] * 30
    records += [make_event()]  # delayed-operation events are not requests
    records += [make_request(api_key=FETCH, api_name="Fetch", local_time_ms=0.1)] * 30
    model = fit_capture_records(records, source="capture X")
    assert model.service_ms(PRODUCE, 300, 0.5) == pytest.approx(0.4)
    assert model.service_ms(FETCH, 6, 0.5) == pytest.approx(0.1)
    assert model.source == "capture X"


def test_a_negative_or_infinite_sample_is_not_a_service_time() -> None:
    fitter = ServiceTimeFitter()
    fitter.add(PRODUCE, 10, -1.0)
    fitter.add(PRODUCE, 10, float("inf"))
    assert fitter.fit().by_api == {}


def test_the_table_round_trips_through_json() -> None:
    fitter = ServiceTimeFitter(seed=5)
    for i in range(200):
        fitter.add(PRODUCE, 100 * i, 0.01 * i)
        fitter.add(FETCH, None, 0.02)
    model = fitter.fit("capture Y")
    table = json.loads(json.dumps(model.to_table()))
    assert ServiceTimeModel.from_table(table) == model


def test_a_hand_written_table_names_apis_and_gives_constants() -> None:
    model = ServiceTimeModel.from_table(
        {
            "entries": [
                {"api": "Produce", "service_ms": 0.5},
                {"api": "Produce", "size_bucket": 3, "service_ms": 4.0},
                {"api": 1, "quantiles_ms": [0.1, 0.2, 0.9]},
            ],
            "default": {"service_ms": 0.05},
        },
        source="table.json",
    )
    assert model.service_ms(PRODUCE, 10, 0.3) == 0.5
    assert model.service_ms(PRODUCE, 300_000, 0.3) == 4.0
    assert model.service_ms(FETCH, None, 0.75) == pytest.approx(0.55)
    assert model.service_ms(METADATA, None, 0.1) == 0.05
    assert model.source == "table.json"


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"format": "other/2"}, "format"),
        ({"entries": [{"api": "NoSuchApi", "service_ms": 1}]}, "entry 0"),
        ({"entries": [{"api": "Fetch", "size_bucket": 9, "service_ms": 1}]}, "size_bucket"),
        ({"entries": [{"api": "Fetch", "quantiles_ms": [2, 1]}]}, "decrease"),
        ({"size_bucket_bounds_bytes": [1, 2]}, "size buckets"),
    ],
)
def test_a_bad_table_is_a_clear_error(table: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ServiceTimeModel.from_table(table)
