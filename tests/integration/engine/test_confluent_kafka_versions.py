"""confluent-kafka can move (issue 29): no code reads its private structures, so the
engine works with any confluent-kafka the pin in pyproject.toml allows, the compiled
data path included.

The lock installs the newest (2.16.x). This test installs the oldest minor the pin
allows (2.15.x) into a directory of its own (`uv pip install --target`, from uv's
cache, the package index only for what the cache lacks) and runs one flow on the
compiled path (`replicator.data.path = compiled`) in a fresh interpreter with that
directory first on `sys.path`, against the real test clusters. The child checks that
it imported that confluent-kafka, and that the copy is exact: every record, in
order, with its key, value, timestamp and own headers, then ours. The engine's whole
suites with 2.15.x installed were run by hand (docs/dataplane.md, "confluent-kafka can
move"); this keeps the cheapest end-to-end proof of it in `make test`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]
#: The oldest confluent-kafka the pin allows, at its newest patch release.
OLDEST = "2.15.1"
PARTITIONS = 2
PER_PARTITION = 100


def _pin_floor() -> str:
    """The lower bound of confluent-kafka in pyproject.toml's dependencies."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        found = re.fullmatch(r"confluent-kafka\s*>=\s*([0-9.]+)\s*,.*", requirement)
        if found:
            return found.group(1)
    raise AssertionError("pyproject.toml declares no confluent-kafka>=X dependency")


def copy_one_flow(primary: str, dr: str) -> dict[str, object]:
    """In the child: copy one topic on the compiled path and compare the copy with the
    source record by record (raises AssertionError on the first difference)."""
    import confluent_kafka  # noqa: PLC0415 (the copy under test, imported in the child)

    from replicator.engine.headers import (  # noqa: PLC0415
        OFFSET_HEADER,
        SOURCE_HEADER,
        TOPIC_HEADER,
        encode_offset,
    )

    from helpers.kafka import create_topic, read_partition, unique_topic  # noqa: PLC0415
    from helpers.replication import end_offsets, flow_config, running, wait_until  # noqa: PLC0415

    topic = unique_topic("ck-versions")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=PARTITIONS)
    producer = confluent_kafka.Producer({"bootstrap.servers": primary, "enable.idempotence": True})
    now_ms = int(time.time() * 1000)
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            key, value = f"k{i}".encode(), f"v{i}".encode() * (1 + i % 5)
            headers = [("app", b"1"), ("app", None), ("empty", b"")] if i % 4 == 1 else None
            if i % 4 == 2:
                key, value = None, b""
            producer.produce(topic, value, key, p, headers=headers, timestamp=now_ms + i)
    assert producer.flush(30) == 0
    flow = flow_config(
        ("primary", primary), ("dr", dr), topic, {"replicator.data.path": "compiled"}
    )
    with running(flow):
        wait_until(
            lambda: end_offsets(dr, remote, PARTITIONS) == [PER_PARTITION] * PARTITIONS,
            90,
            f"{remote} on dr holds every record",
        )
    for p in range(PARTITIONS):
        copied, source = read_partition(dr, remote, p), read_partition(primary, topic, p)
        assert [o for o, _ in copied] == [o for o, _ in source] == list(range(PER_PARTITION))
        for (offset, replica), (_, original) in zip(copied, source, strict=True):
            ours = (
                (SOURCE_HEADER, b"primary"),
                (OFFSET_HEADER, encode_offset(offset)),
                (TOPIC_HEADER, topic.encode()),
            )
            made = (original.key, original.value, original.timestamp, (*original.headers, *ours))
            got = (replica.key, replica.value, replica.timestamp, replica.headers)
            assert got == made, f"partition {p} offset {offset}: {got} != {made}"
    return {
        "version": confluent_kafka.version(),
        "file": confluent_kafka.__file__,
        "records": PARTITIONS * PER_PARTITION,
    }


def test_a_flow_on_the_compiled_path_with_the_oldest_confluent_kafka_the_pin_allows(
    primary: str, dr: str, tmp_path: Path
) -> None:
    floor = _pin_floor()
    assert OLDEST.startswith(f"{floor}."), (
        f"pyproject.toml's confluent-kafka floor is {floor} but this test installs {OLDEST}: "
        f"set OLDEST to the newest {floor}.x release"
    )
    target = tmp_path / "site"
    uv = Path(sys.executable).with_name("uv")
    install = subprocess.run(
        [uv, "pip", "install", "-q", "--python", sys.executable, "--no-deps",
         "--target", target, f"confluent-kafka=={OLDEST}"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert install.returncode == 0, (
        f"installing confluent-kafka {OLDEST} into {target} failed (uv needs it in its cache "
        f"or the package index):\n{install.stderr[-3000:]}"
    )
    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path[:0] = [{str(target)!r}, {str(ROOT / "tests")!r}]
        from integration.engine.test_confluent_kafka_versions import copy_one_flow
        print(json.dumps(copy_one_flow({primary!r}, {dr!r})))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    child = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert child.returncode == 0, child.stdout[-2000:] + child.stderr[-6000:]
    found = json.loads(child.stdout.strip().splitlines()[-1])
    assert found["version"] == OLDEST, found
    assert Path(found["file"]).is_relative_to(target), found
    assert found["records"] == PARTITIONS * PER_PARTITION
