"""Session hooks: the interpreted kernel tests start beside the suite as soon as collection ends
(``interpreted_kernels``)."""

from __future__ import annotations

import interpreted_kernels
import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    if interpreted_kernels.wanted() and any(item.name == interpreted_kernels.NODE_NAME for item in session.items):
        interpreted_kernels.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    interpreted_kernels.stop()
