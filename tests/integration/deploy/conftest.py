"""Fixtures of the Docker deployment tests."""

from __future__ import annotations

import pytest

from helpers.compose import Figures


@pytest.fixture(scope="module")
def figures() -> Figures:
    """Times and sizes a test module measures, printed at its end."""
    return Figures()
