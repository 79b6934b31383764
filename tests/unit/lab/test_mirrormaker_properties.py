"""The mm2.properties our MirrorMaker launcher writes: plugins found through their
ServiceLoader manifests, at the top and for each cluster's herder (without the
reflective scan of every jar, 7 to 14 s of each start); the caller's value wins."""

from __future__ import annotations

from pathlib import Path

from replicator_lab.mirrormaker import MirrorMaker


def test_plugins_are_found_through_their_manifests(tmp_path: Path) -> None:
    mm2 = MirrorMaker({"clusters": "primary, dr", "primary->dr.enabled": "true"}, tmp_path)
    assert {k: v for k, v in mm2.properties.items() if k.endswith("plugin.discovery")} == {
        "plugin.discovery": "service_load",
        "primary.plugin.discovery": "service_load",
        "dr.plugin.discovery": "service_load",
    }
    assert mm2.properties["primary->dr.enabled"] == "true"


def test_a_discovery_mode_given_wins(tmp_path: Path) -> None:
    given = {"clusters": "a, b", "b.plugin.discovery": "hybrid_warn"}
    assert MirrorMaker(given, tmp_path).properties["b.plugin.discovery"] == "hybrid_warn"
