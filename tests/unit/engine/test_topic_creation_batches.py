"""Remote topics are created in requests of at most `CREATE_PARTITIONS_PER_REQUEST`
partitions (issue 41): a KRaft controller refuses a CreateTopics request of more than
10,000 records as a whole ("Unable to perform excessively large batch operation"),
which is what MirrorMaker 2 met at 2,500 topics x 4 partitions, retrying forever."""

from __future__ import annotations

from confluent_kafka.admin import NewTopic

from replicator.engine.topic_sync import CREATE_PARTITIONS_PER_REQUEST, _batches


def test_an_estate_of_topics_is_created_in_requests_the_controller_accepts() -> None:
    topics = [NewTopic(f"src.estate-{i:05d}", 4) for i in range(2_501)]
    batches = _batches(topics)
    assert [t.topic for batch in batches for t in batch] == [t.topic for t in topics]
    sizes = [sum(t.num_partitions for t in batch) for batch in batches]
    assert sizes == [4_000, 4_000, 2_004]
    assert max(sizes) + len(batches[0]) < 10_000  # a record per partition and per topic


def test_a_topic_larger_than_a_request_goes_alone() -> None:
    topics = [NewTopic("small", 10), NewTopic("huge", CREATE_PARTITIONS_PER_REQUEST + 1)]
    assert [[t.topic for t in batch] for batch in _batches(topics)] == [["small"], ["huge"]]
