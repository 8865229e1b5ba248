"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.group_harness import no_timer_failures


@pytest.fixture
def timer_tasks_must_not_fail(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail the test if a timer task raised during it (timers log, they do not raise).
    Modules opt in with ``pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")``."""
    yield
    no_timer_failures(caplog.get_records("setup") + caplog.get_records("call"))
