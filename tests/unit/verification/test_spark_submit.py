"""The spark-submit command is built deterministically, without Spark."""

from __future__ import annotations

from pathlib import Path

from replicator.verification.submit import SparkSubmit


def test_command_has_master_jars_conf_in_a_stable_order() -> None:
    submit = SparkSubmit(
        Path("spark/verify.py"),
        ["--plan", "plan.json", "--out", "out"],
        master="spark://spark-master:7077",
        jars=[Path("a.jar"), Path("b.jar")],
        conf={"spark.ui.enabled": "false", "spark.executor.memory": "2g"},
        name="verify primary->dr",
    )
    assert submit.command("/opt/spark/bin/spark-submit") == [
        "/opt/spark/bin/spark-submit",
        "--master", "spark://spark-master:7077",
        "--name", "verify primary->dr",
        "--jars", "a.jar,b.jar",
        "--conf", "spark.executor.memory=2g",
        "--conf", "spark.ui.enabled=false",
        "spark/verify.py", "--plan", "plan.json", "--out", "out",
    ]  # fmt: skip


def test_local_defaults() -> None:
    assert SparkSubmit(Path("job.py")).command() == [
        "spark-submit", "--master", "local[2]", "job.py"
    ]  # fmt: skip


def test_shipped_truststore_and_keystore_go_to_files_after_py_files() -> None:
    submit = SparkSubmit(
        Path("verify.py"),
        ["--plan", "plan.json"],
        master="spark://spark-master:7077",
        py_files=[Path("/run/verification-packages.zip")],
        files=[Path("/secrets/ca.pem"), Path("/secrets/replicator.keystore.pem")],
    )
    assert submit.command() == [
        "spark-submit",
        "--master", "spark://spark-master:7077",
        "--py-files", "/run/verification-packages.zip",
        "--files", "/secrets/ca.pem,/secrets/replicator.keystore.pem",
        "verify.py", "--plan", "plan.json",
    ]  # fmt: skip
