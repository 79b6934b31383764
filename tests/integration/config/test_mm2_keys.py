"""tests/unit/config/mm2_keys.tsv is MirrorMaker 2's own list of keys: every key of the
ConfigDefs of MirrorSourceConfig, MirrorCheckpointConfig, MirrorHeartbeatConfig and
MirrorMakerConfig in the Kafka jars the project runs, with its type and default,
printed by DumpMm2Keys.java. The unit tests load each of them
(tests/unit/config/test_settings_table.py); this test proves the list is the jars'.
After a Kafka upgrade, regenerate it:

    java -cp "$(python -c 'from replicator_lab.jvm import artifact_classpath;
    print(artifact_classpath("kafka"))')" tests/integration/config/DumpMm2Keys.java \\
    | sort -t$'\\t' -k2,2 -k1,1 > tests/unit/config/mm2_keys.tsv
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from replicator_lab.jvm import artifact_classpath, find_java

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
COMMITTED = HERE.parents[1] / "unit" / "config" / "mm2_keys.tsv"


def test_the_committed_key_list_is_the_kafka_jars():
    done = subprocess.run(
        [str(find_java()), "-cp", artifact_classpath("kafka"), str(HERE / "DumpMm2Keys.java")],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    dumped = done.stdout.splitlines()
    committed = COMMITTED.read_text().splitlines()
    assert sorted(dumped) == sorted(committed), (
        "tests/unit/config/mm2_keys.tsv differs from the jars' ConfigDefs: regenerate it "
        "(see this module's docstring) and check each new key in keys.py"
    )
    assert len({line.split("\t")[1] for line in committed}) > 100
