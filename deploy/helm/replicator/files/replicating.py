"""Readiness probe of the replicator chart: "replicating".

Reads the engine's Prometheus endpoint (http://127.0.0.1:<port>/metrics, port from the
first argument) and exits 0 when every worker loop of this process runs
(`replicator_worker_running` 1, at least one series) and every cluster answers
(`replicator_cluster_reachable` 1); else exits 1 with one line saying what is not.
Only the standard library: it runs with the image's Python every few seconds.
"""

import sys
import urllib.request


def main(port: int) -> str | None:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    workers, problems = 0, []
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series.startswith("replicator_worker_running{"):
            workers += 1
            if float(value) != 1.0:
                problems.append(f"not running: {series}")
        elif series.startswith("replicator_cluster_reachable{") and float(value) != 1.0:
            problems.append(f"unreachable: {series}")
    if not workers:
        problems.append(f"no worker loop reported at {url} yet")
    return "; ".join(problems) or None


if __name__ == "__main__":
    try:
        problem = main(int(sys.argv[1]))
    except Exception as exc:  # any failure to answer is "not ready", said in one line
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        sys.stderr.write(problem + "\n")
    sys.exit(1 if problem else 0)
