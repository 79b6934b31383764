"""`replicator --version`: the version and the client libraries, exit 0 (issue 30)."""

from __future__ import annotations

import confluent_kafka
import pytest

from replicator import __version__
from replicator.cli import main


def test_version_names_the_replicator_and_its_kafka_client(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    line = capsys.readouterr().out.strip()
    assert line == (
        f"replicator {__version__} (confluent-kafka {confluent_kafka.__version__}, "
        f"librdkafka {confluent_kafka.libversion()[0]})"
    )
