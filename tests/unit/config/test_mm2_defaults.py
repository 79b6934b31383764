"""A file that relies on MM2's defaults where ours differ is told so at start; MM2's own
settings that a takeover needs are read as MM2 reads them."""

from __future__ import annotations

from replicator.config import load_config
from replicator.config.mm2_defaults import silent_differences
from replicator.engine.mm2_state import connect_offsets_topic

FILE = """\
clusters = primary, dr
primary.bootstrap.servers = 127.0.0.1:9
dr.bootstrap.servers = 127.0.0.1:9
primary->dr.enabled = true
"""


def test_a_file_silent_on_acl_sync_and_topics_exclude_is_told_both_defaults(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text(FILE)
    lines = silent_differences(load_config(path).flow("primary->dr"))
    assert [line.split(" is not set")[0] for line in lines] == [
        "primary->dr: topics.exclude",
        "primary->dr: sync.topic.acls.enabled",
    ]
    acls = lines[1]
    assert "false here where MirrorMaker 2 would use true" in acls
    assert "set sync.topic.acls.enabled to choose" in acls


def test_a_setting_written_at_top_or_flow_level_or_by_its_alias_is_not_mentioned(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text(FILE + "sync.topic.acls.enabled = true\nprimary->dr.topics.blacklist = x\n")
    assert silent_differences(load_config(path).flow("primary->dr")) == []


def test_mm2s_offsets_topic_is_read_as_mm2s_worker_reads_it(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text(FILE + "dr.offset.storage.topic = dr-offsets\n")
    assert load_config(path).flow("primary:dr").mm2_offsets_topic == "dr-offsets"
    path.write_text(FILE + "dr.offset.storage.topic = dr-offsets\noffset.storage.topic = top\n")
    assert load_config(path).flow("primary:dr").mm2_offsets_topic == "top"
    path.write_text(FILE)
    flow = load_config(path).flow("primary:dr")
    assert flow.mm2_offsets_topic is None
    assert connect_offsets_topic(flow) == "mm2-offsets.primary.internal"
