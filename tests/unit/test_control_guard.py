"""The control endpoint's request guard (broker/control/guard.py) and the console's
small pure parts: which requests a web page could forge are refused, and why."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request

from broker.control.console.pages import bucket_strip
from broker.control.console.view_purgatory import PurgatoryRates
from broker.control.console.view_records import render_bytes
from broker.control.guard import RequestGuard, is_loopback

TOKEN = "s3cret"
HOST = "127.0.0.1:9990"


def _refusal(method: str, host: str | None = HOST, **headers: str) -> int | None:
    all_headers = dict(headers)
    if host is not None:
        all_headers["Host"] = host
    request = make_mocked_request(method, "/brokers/1/stop", headers=all_headers)
    refused = RequestGuard(TOKEN, "127.0.0.1").refusal(request)
    return None if refused is None else refused[0]


JSON = {"Content-Type": "application/json"}
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_the_issues_text_plain_cross_origin_post_is_refused() -> None:
    assert (
        _refusal("POST", **{"Content-Type": "text/plain", "Origin": "http://evil.example"}) == 403
    )
    assert _refusal("POST", **{"Content-Type": "text/plain"}, **AUTH) == 415
    assert _refusal("POST", **{"Content-Type": "application/x-www-form-urlencoded"}, **AUTH) == 415


def test_a_state_change_needs_the_token() -> None:
    assert _refusal("POST", **JSON) == 401
    assert _refusal("DELETE") == 401
    assert _refusal("POST", **JSON, Authorization="Bearer nope") == 403
    assert _refusal("POST", **JSON, **AUTH) is None
    assert _refusal("POST", **JSON, **{"X-MiniKafka-Token": TOKEN}) is None
    assert _refusal("POST", **JSON, **AUTH, Origin=f"http://{HOST}") is None


@pytest.mark.parametrize("host", ["evil.example", "evil.example:9990", "10.0.0.1:9990", None])
def test_reads_under_another_name_are_refused(host: str | None) -> None:
    assert _refusal("GET", host=host) == 403


@pytest.mark.parametrize("host", ["127.0.0.1:9990", "localhost:9990", "[::1]:9990", "localhost"])
def test_reads_under_this_endpoints_names_pass(host: str) -> None:
    assert _refusal("GET", host=host) is None


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.1.1.1", "example.com", "::"))


def test_values_render_as_text_json_or_hex() -> None:
    assert render_bytes(b'{"a":1}', "json") == '{\n  "a": 1\n}'
    assert render_bytes(b"not json", "json") == "not json"
    assert render_bytes(b"ab", "hex") == "61 62"
    assert render_bytes(b"\xff", "text") == "\ufffd"
    assert render_bytes(None, "text") is None


def test_a_wheel_level_is_drawn_with_its_current_bucket_marked() -> None:
    assert str(bucket_strip([0, 2, 0], 2)) == '<b></b><b>2</b><b class="now"></b>'


def test_purgatory_rates_are_counts_over_at_least_a_second() -> None:
    rates = PurgatoryRates()
    assert rates.rate((0, "Fetch"), 1_000, 0, 0) == (0.0, 0.0)
    assert rates.rate((0, "Fetch"), 1_500, 10, 1) == (0.0, 0.0)  # too short a window
    assert rates.rate((0, "Fetch"), 3_000, 40, 4) == (20.0, 2.0)
