"""A file that relies on MM2's default where ours differs is told so at start."""

from __future__ import annotations

from replicator.config import load_config
from replicator.config.mm2_defaults import silent_differences

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
