"""`GroupAdmin.end_offsets` and `start_offsets` list the metadata before they ask: a
ListOffsets call that finds a topic missing from its client's metadata cache (a new
client's first call) looks leaders up on librdkafka's asynchronous path (a 3 s wait,
and the path of a crash: `replicator.kafka.bounds`). On the mock cluster: a new client
answers at once, and in that order."""

from __future__ import annotations

from replicator.config.model import ClusterConfig
from replicator.kafka.clients import admin_for
from replicator.offsets.groups import GroupAdmin

from helpers.mock_cluster import mock_cluster


class _Recording:
    """An admin client that records which calls it was asked, in order."""

    def __init__(self, admin: object) -> None:
        self._admin = admin
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        if name in ("list_topics", "list_offsets"):
            self.calls.append(name)
        return getattr(self._admin, name)


def test_the_metadata_is_listed_before_the_offsets_are_asked() -> None:
    with mock_cluster() as mock:
        mock.create_topic("orders", 2)
        mock.produce("orders", {1: 1})
        servers = {"bootstrap.servers": mock.bootstrap_servers}
        cluster = ClusterConfig("mock", mock.bootstrap_servers, admin=servers)
        admin = _Recording(admin_for(cluster))
        groups = GroupAdmin(cluster, admin)  # type: ignore[arg-type]
        try:
            ends = groups.end_offsets([("orders", 0), ("orders", 1)])
            starts = groups.start_offsets([("orders", 1)])
        finally:
            groups.close()
    assert ends == {("orders", 0): 0, ("orders", 1): 1}
    assert starts == {("orders", 1): 0}
    assert admin.calls == ["list_topics", "list_offsets"] * 2
