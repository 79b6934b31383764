#!/opt/venv/bin/python
"""Docker HEALTHCHECK of the replicator image, for whichever role the container runs.

One image serves every role (see the Dockerfile), so one check finds the role from
the commands running in the container and asks that role's own health question:

- a Kafka broker (`replicator stack serve`, then `kafka.Kafka`): a metadata request
  answers on its internal port;
- `replicator run`: it replicates (`replicator.probe`: its Prometheus endpoint, the
  `metrics.port` of its config, says every worker loop runs and every cluster answers);
- Airflow's API server: `/api/v2/monitor/health` reports the metadata DB healthy;
  the scheduler: its own health server (`[scheduler] enable_health_check`);
  the dag processor and the triggerer: the API server reports their heartbeat healthy;
- Spark's master and worker: their web UI answers with the master ALIVE;
- the verification server (Spark Connect): its port and its warm suites' accept connections;
- anything else (the demo application, one-shot jobs): running is healthy.

Exit 0 when healthy, 1 with one line saying what is not.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.request
from pathlib import Path

_TIMEOUT_S = 8.0


def _commands() -> list[list[str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if raw:
                found.append(raw.rstrip(b"\0").decode(errors="replace").split("\0"))
    return found


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:  # noqa: S310 - our own URL
        return json.loads(response.read() or b"{}")


# Each role imports only what its check needs: Docker runs the check every few seconds
# in every container, and the replicator's config loader costs a large share of a core.
def _kafka() -> str | None:
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    bootstrap = os.environ.get("HEALTHCHECK_KAFKA", "127.0.0.1:9092")
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=_TIMEOUT_S)
    return None if metadata.brokers else f"Kafka at {bootstrap} reports no broker"


def _replicator(command: list[str]) -> str | None:
    from replicator.config import load_config  # noqa: PLC0415
    from replicator.probe import replicating  # noqa: PLC0415

    config = command[command.index("--config") + 1]
    ports = {flow.metrics_port for flow in load_config(Path(config)).flows if flow.metrics_port}
    if not ports:
        return None  # no metrics endpoint configured: running is all Docker can see
    return replicating(min(ports))


def _airflow(component: str) -> str | None:
    if component == "scheduler":
        _get_json("http://127.0.0.1:8974/health")
        return None
    api = os.environ.get("AIRFLOW_API_URL", "http://127.0.0.1:8080").rstrip("/")
    health = _get_json(f"{api}/api/v2/monitor/health")
    key = {"api-server": "metadatabase", "dag-processor": "dag_processor"}.get(component, component)
    status = health.get(key, {}).get("status")
    return None if status == "healthy" else f"Airflow reports {key} {status!r}"


def _spark(port: int) -> str | None:
    info = _get_json(f"http://127.0.0.1:{port}/json/")
    status = info.get("status", "ALIVE")
    return None if status == "ALIVE" else f"Spark master is {status}"


def _spark_connect(command: list[str]) -> str | None:
    port_conf = "spark.connect.grpc.binding.port="
    [port] = [part.removeprefix(port_conf) for part in command if part.startswith(port_conf)]
    socket.create_connection(("127.0.0.1", int(port)), timeout=_TIMEOUT_S).close()
    # Its warm suites, on the next port (`replicator.verification.server.suites_port`).
    socket.create_connection(("127.0.0.1", int(port) + 1), timeout=_TIMEOUT_S).close()
    return None


def check() -> str | None:
    """None when healthy, else what is wrong."""
    for command in _commands():
        joined = " ".join(command)
        names = [Path(part).name for part in command]
        # Before the JVM replaces it, `replicator stack serve` formats the storage: a
        # broker that does not answer yet is not healthy, whichever process runs.
        if "kafka.Kafka" in command or ("replicator" in names and "serve" in command):
            return _kafka()
        for daemon, ui_port in (("master.Master", 8080), ("worker.Worker", 8081)):
            if f"org.apache.spark.deploy.{daemon}" in joined:
                return _spark(ui_port)
        if "org.apache.spark.sql.connect.service.SparkConnectServer" in command:
            return _spark_connect(command)
        if "replicator" in names and "run" in command and "--config" in command:
            return _replicator(command)
        if "airflow" in names:
            component = command[names.index("airflow") + 1 :][:1]
            if component and component[0] in {
                "api-server",
                "scheduler",
                "dag-processor",
                "triggerer",
            }:
                return _airflow(component[0])
    return None


def main() -> int:
    try:
        problem = check()
    except Exception as exc:  # any failure to answer is "unhealthy"
        problem = f"{type(exc).__name__}: {exc}"
    if problem is None:
        return 0
    sys.stderr.write(f"{problem}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
