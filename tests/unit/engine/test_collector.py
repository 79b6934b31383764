"""The cyclic collector's pace in a replicating process."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from replicator.engine.collector import YOUNG_COLLECTION_EVERY, pace_for_replication


@pytest.fixture(autouse=True)
def restore_threshold() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_young_collections_are_spaced_out_and_older_generations_keep_their_pace():
    gc.set_threshold(700, 10, 10)
    pace_for_replication()
    assert gc.get_threshold() == (YOUNG_COLLECTION_EVERY, 10, 10)


@pytest.mark.parametrize("young", [0, YOUNG_COLLECTION_EVERY * 2])
def test_a_process_that_collects_less_often_or_never_is_left_alone(young):
    gc.set_threshold(young, 10, 10)
    pace_for_replication()
    assert gc.get_threshold() == (young, 10, 10)
