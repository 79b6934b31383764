""" "Replicating": the health question a container or a pod of `replicator run` answers.

A worker is replicating when its Prometheus endpoint (`metrics.port`) answers, every
worker loop of the process runs (`replicator_worker_running` 1, at least one series)
and every cluster answers (`replicator_cluster_reachable` 1). "/metrics answers" alone
is not enough: a worker whose loop died, or that cannot reach a cluster, still serves
its metrics.

A process whose every flow the DR state store stops on purpose (the standby direction,
or a paused flow: `replicator_flow_desired_running` 0 for each, and no worker loop)
does what it should and is healthy too: standing by. Were it not, a Deployment of the
standby direction (the Helm chart's, `maxUnavailable: 0`) could never finish a rolling
update: no new pod would ever be ready, so no old one would ever go, and the old
configuration would still run when a failover starts the flow.

Used by the image's Docker HEALTHCHECK (docker/healthcheck.py) and by the Helm chart's
readiness probe (`python3 -m replicator.probe PORT`). Only the standard library: it
runs every few seconds in every replicator container.
"""

from __future__ import annotations

import sys
import urllib.request

_TIMEOUT_S = 5.0


def replicating(port: int, host: str = "127.0.0.1") -> str | None:
    """None when the worker at `host:port` replicates, else one line saying what not."""
    url = f"http://{host}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
        text = response.read().decode()
    workers, wanted, stopped, problems = 0, 0, 0, []
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series.startswith("replicator_worker_running{"):
            workers += 1
            if float(value) != 1.0:
                problems.append(f"not running: {series}")
        elif series.startswith("replicator_flow_desired_running{"):
            if float(value) == 1.0:
                wanted += 1
            else:
                stopped += 1
        elif series.startswith("replicator_cluster_reachable{") and float(value) != 1.0:
            problems.append(f"unreachable: {series}")
    standing_by = stopped and not wanted  # every flow stopped on purpose: no loop is right
    if not workers and not standing_by:
        problems.append(f"no worker loop reported at {url} yet")
    return "; ".join(problems) or None


def main(argv: list[str]) -> int:
    """`python -m replicator.probe PORT`: exit 0 when replicating, else 1 and one line."""
    if len(argv) != 1 or not argv[0].isdigit():
        sys.stderr.write("usage: python -m replicator.probe METRICS_PORT\n")
        return 2
    try:
        problem = replicating(int(argv[0]))
    except Exception as exc:  # any failure to answer is "not replicating", said in one line
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        sys.stderr.write(problem + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
