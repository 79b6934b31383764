"""The Helm chart's init Job (templates/job-init.yaml), as `helm template` renders it:
`replicator init` as a pre-install/pre-upgrade hook with this release's configuration
(a hook ConfigMap of its own, created first), the workers' Secrets, state store,
environment and security context, `--allow-unreachable` so that an outage of one
cluster does not keep the workers from starting, and pod labels the workers' Service
and PodDisruptionBudget do not select. The API server creates it with strict field
validation in tests/integration/deploy/test_helm_chart.py (the defaults); how it runs
on a node: docs/kubernetes.md, "The init Job"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.kube import helm, render

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "replicator"
HOOK = "helm.sh/hook"

VALUES: dict[str, Any] = {
    "secrets": ["source-user", "source-cluster-ca"],
    "stateStore": {"existingSecret": {"name": "state-store", "key": "url"}},
    "extraEnv": [{"name": "SOURCE_PASSWORD", "value": "-"}],
    "nodeSelector": {"disk": "ssd"},
    "init": {
        "home": "source",
        "backoffLimit": 4,
        "activeDeadlineSeconds": 200,
        "ttlSecondsAfterFinished": 3600,
        "resources": {"limits": {"memory": "300Mi"}},
    },
    "config": (
        "clusters = source, target\n"
        "source.bootstrap.servers = source-kafka-bootstrap:9093\n"
        "target.bootstrap.servers = target-kafka-bootstrap:9092\n"
        "source->target.enabled = true\n"
        "source->target.topics = orders.*\n"
        "applications.orders.producer.principals = User:orders\n"
    ),
}


def _render(tmp_path: Path, values: dict[str, Any]) -> dict[tuple[str, str], dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    objects = render(CHART, "dr", "kafka-dr", tmp_path / "helm", path)
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_init_job_runs_init_as_the_workers_run(tmp_path: Path) -> None:
    objects = _render(tmp_path, VALUES)
    job = objects[("Job", "dr-replicator-init")]
    hook_config = objects[("ConfigMap", "dr-replicator-init")]
    deployment = objects[("Deployment", "dr-replicator")]

    # A hook: before the chart's other objects at install and upgrade, its ConfigMap first.
    for obj in (job, hook_config):
        annotations = obj["metadata"]["annotations"]
        assert annotations[HOOK] == "pre-install,pre-upgrade"
        assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation"
    weights = [int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in (hook_config, job)]
    assert weights[0] < weights[1]
    # This release's configuration, not the previous one's.
    worker_config = objects[("ConfigMap", "dr-replicator")]
    assert hook_config["data"] == worker_config["data"]
    assert "metrics.port = 9404" in hook_config["data"]["mm2.properties"]
    assert HOOK not in worker_config["metadata"].get("annotations", {})

    spec = job["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (4, 200)
    assert spec["ttlSecondsAfterFinished"] == 3600
    pod, worker_pod = spec["template"]["spec"], deployment["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    # The chart's ServiceAccount does not exist yet at pre-install: none named.
    assert "serviceAccountName" not in pod
    for key in ("securityContext", "nodeSelector"):
        assert pod[key] == worker_pod[key], key
    (container,) = pod["containers"]
    (worker,) = worker_pod["containers"]
    assert container["command"] == [
        "replicator", "init", "--config", "/etc/replicator/mm2.properties",
        "--home", "source", "--allow-unreachable",
    ]  # fmt: skip
    for key in ("image", "imagePullPolicy", "env", "securityContext", "volumeMounts"):
        assert container[key] == worker[key], key
    assert container["resources"] == {  # values.yaml's, with this memory limit
        "limits": {"cpu": "1", "memory": "300Mi"},
        "requests": {"cpu": "100m", "memory": "256Mi"},
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes.pop("config") == {"name": "config", "configMap": {"name": "dr-replicator-init"}}
    assert volumes == {v["name"]: v for v in worker_pod["volumes"] if v["name"] != "config"}
    # Not a worker: neither the metrics Service nor the PodDisruptionBudget selects it.
    labels = spec["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "init"
    (budget,) = [o for (kind, _), o in objects.items() if kind == "PodDisruptionBudget"]
    for selector in (
        deployment["spec"]["selector"]["matchLabels"],
        objects[("Service", "dr-replicator-metrics")]["spec"]["selector"],
        budget["spec"]["selector"]["matchLabels"],
    ):
        assert not all(labels.get(k) == v for k, v in selector.items()), selector


def test_init_job_defaults_and_options(tmp_path: Path) -> None:
    defaults = _render(tmp_path / "defaults", {})
    job = defaults[("Job", "dr-replicator-init")]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"][-1] == "--allow-unreachable"
    assert "--home" not in container["command"]
    assert "ttlSecondsAfterFinished" not in job["spec"]

    existing_account = _render(
        tmp_path / "account",
        {"serviceAccount": {"create": False, "name": "dr-engine"}, "init": {"home": "dr"}},
    )
    pod = existing_account[("Job", "dr-replicator-init")]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "dr-engine"  # it exists before the hook runs

    strict = _render(tmp_path / "strict", {"init": {"allowUnreachable": False}})
    (container,) = strict[("Job", "dr-replicator-init")]["spec"]["template"]["spec"]["containers"]
    assert "--allow-unreachable" not in container["command"]

    off = _render(tmp_path / "off", {"init": {"enabled": False}})
    assert not [key for key in off if key[1].endswith("-init")]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"config": VALUES["config"]}, "init.home: the configuration names applications"),
        ({"init": {"backoffLimit": "two"}}, "at '/init/backoffLimit': got string, want integer"),
        ({"init": {"activeDeadlineSeconds": 0}}, "/init/activeDeadlineSeconds"),
        ({"init": {"homee": "dr"}}, "additional properties 'homee'"),
    ],
)
def test_init_job_refuses(tmp_path: Path, values: dict, message: str) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = helm("template", "dr", str(CHART), "--values", str(path), home=tmp_path / "helm",
                  check=False)  # fmt: skip
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
