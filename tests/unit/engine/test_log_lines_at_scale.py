"""Log lines stay short at an estate's size (`replicator.listing`): a rebalance of 1,000
partitions wrote a line of 17 KB, and the start of a flow of 2,500 topics a line per
topic created (`test_topic_creation_batches`). Log shippers split or cut long lines
(Docker's json-file driver at 16 KB)."""

from __future__ import annotations

from confluent_kafka import TopicPartition

from replicator.engine.rebalance import _describe
from replicator.listing import counted, first_of, partitions_text


def test_first_of_names_a_few_and_counts_the_rest() -> None:
    assert first_of([]) == ""
    assert first_of(["a", "b"]) == "a, b"
    assert first_of([str(i) for i in range(12)], 3, "groups") == "0, 1, 2 and 9 more groups"
    assert first_of(["x", "y", "z"], 2, sep="; ") == "x; y and 1 more"
    assert counted(1, "topic") == "1 topic"
    assert counted(2500, "topic") == "2,500 topics"


def test_partitions_are_listed_per_topic_in_runs() -> None:
    pairs = [("orders", 3), ("orders", 0), ("orders", 1), ("orders", 2), ("pay", 4), ("pay", 1)]
    assert partitions_text(pairs) == "orders[0-3], pay[1,4] (6 partitions of 2 topics)"
    assert partitions_text([("a", 0), ("a", 2), ("a", 3), ("a", 5)]) == (
        "a[0,2-3,5] (4 partitions of 1 topic)"
    )
    assert partitions_text([]) == "no partitions"


def test_an_estates_assignment_is_one_short_line() -> None:
    assignment = [TopicPartition(f"estate-{t:05d}", p) for t in range(2_500) for p in range(4)]
    line = _describe(assignment)
    assert line == (
        "estate-00000[0-3], estate-00001[0-3], estate-00002[0-3], estate-00003[0-3], "
        "estate-00004[0-3], estate-00005[0-3], estate-00006[0-3], estate-00007[0-3], "
        "estate-00008[0-3], estate-00009[0-3] and 2490 more topics "
        "(10,000 partitions of 2,500 topics)"
    )
    # A small one still names each partition and where it starts.
    small = [TopicPartition("orders", 0, 42), TopicPartition("orders", 1)]
    assert _describe(small) == "orders[0]@42, orders[1]"
