"""An MM2 file naming custom Java classes loads unchanged once a package porting them
is installed: `replication.policy.class`, `topic.filter.class` and `group.filter.class`
find the Python classes registered under the Java names (entry points
`replicator.replication_policies`, `replicator.topic_filters`, `replicator.group_filters`).
Without the package, the load fails naming the class and how to register a port.

The package is a wheel built here and installed with pip (no index) into a throwaway
venv that sees the project's own environment, so the project's venv is never touched."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from replicator.config import ConfigError, load_config

pytestmark = pytest.mark.integration

POLICY = "com.acme.mm2.TenantReplicationPolicy"
TOPIC_FILTER = "com.acme.mm2.TenantTopicFilter"
GROUP_FILTER = "com.acme.mm2.TenantGroupFilter"
MM2_DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"

_PORTS = '''
from replicator.config.policies import DefaultReplicationPolicy


class TenantReplicationPolicy(DefaultReplicationPolicy):
    """Remote topics named <source><infix><topic>, the infix a setting of its own."""

    config_keys = ("replication.policy.tenant.infix",)

    def configure(self, settings):
        self.infix = settings["replication.policy.tenant.infix"]

    def format_remote_topic(self, source_alias, topic):
        return f"{source_alias}{self.infix}{topic}"


class TenantTopicFilter:
    config_keys = ("tenant.prefix",)

    def configure(self, settings):
        self.prefix = settings["tenant.prefix"]
        self.tasks = settings["tasks.max"]

    def should_replicate_topic(self, topic):
        return topic.startswith(self.prefix)


class TenantGroupFilter:
    def should_replicate_group(self, group):
        return group.startswith("app-")
'''

_ENTRY_POINTS = f"""\
[replicator.replication_policies]
{POLICY} = acme_mm2_ports:TenantReplicationPolicy

[replicator.topic_filters]
{TOPIC_FILTER} = acme_mm2_ports:TenantTopicFilter

[replicator.group_filters]
{GROUP_FILTER} = acme_mm2_ports:TenantGroupFilter
"""

_CONFIG = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a1:9092",
    "B.bootstrap.servers": "b1:9092",
    "A->B.enabled": "true",
    "tasks.max": "3",
    "replication.policy.class": POLICY,
    "topic.filter.class": TOPIC_FILTER,
    "A->B.group.filter.class": GROUP_FILTER,
    # Settings of the ports' own, which they declare (config_keys): flow over top level.
    "tenant.prefix": "tenant2.",
    "A->B.tenant.prefix": "tenant1.",
    "replication.policy.tenant.infix": "_",
}
_PORTS_OWN = ("tenant.prefix", "A->B.tenant.prefix", "replication.policy.tenant.infix")

_PROBE = """
import json, sys
from replicator.config import load_config
flow = load_config(json.loads(sys.argv[1])).flows[0]
print(json.dumps({
    "policy": type(flow.policy).__name__,
    "remote": flow.policy.format_remote_topic("A", "tenant1.orders"),
    "topics": [t for t in ("tenant1.orders", "tenant2.orders") if flow.topics.matches(t)],
    "why_not": flow.topics.why_not("tenant2.orders"),
    "groups": [g for g in ("app-billing", "console-consumer-1") if flow.groups.matches(g)],
    "configured": flow.topics.port.tasks,
}))
"""


def _wheel(directory: Path) -> Path:
    """acme_mm2_ports 0.1, a pure-Python wheel with its entry points."""
    dist = "acme_mm2_ports-0.1.dist-info"
    files = {
        "acme_mm2_ports/__init__.py": _PORTS,
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: acme-mm2-ports\nVersion: 0.1\n",
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{dist}/entry_points.txt": _ENTRY_POINTS,
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    path = directory / "acme_mm2_ports-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


@pytest.fixture(scope="module")
def ported_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees the project's environment (a .pth adding its site-packages)
    and has the porting package installed by pip from a local wheel."""
    root = tmp_path_factory.mktemp("ports")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site_packages = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    ours = sysconfig.get_paths()["purelib"]
    (Path(site_packages) / "project.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--no-deps", "--quiet",
         str(_wheel(root))],
        check=True,
    )  # fmt: skip
    return python


def test_an_mm2_file_with_custom_classes_loads_once_their_port_is_installed(ported_venv: Path):
    done = subprocess.run(
        [str(ported_venv), "-c", _PROBE, json.dumps(_CONFIG)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "policy": "TenantReplicationPolicy",
        "remote": "A_tenant1.orders",
        "topics": ["tenant1.orders"],
        "why_not": f"refused by topic.filter.class {TOPIC_FILTER}",
        "groups": ["app-billing"],
        "configured": "3",
    }


def test_without_the_port_the_error_names_the_class_and_how_to_register_one():
    """In the project's own environment, where no package registers them; nor are the
    settings the ports would read known then."""
    with pytest.raises(ConfigError) as info:
        load_config(_CONFIG)
    assert "replication.policy.tenant.infix: unknown setting" in str(info.value)
    base = {k: v for k, v in _CONFIG.items() if k not in _PORTS_OWN}
    with pytest.raises(ConfigError) as info:
        load_config({**base, "replication.policy.class": MM2_DEFAULT_POLICY})
    message = str(info.value)
    assert message.startswith(f"topic.filter.class = {TOPIC_FILTER}: no Python port")
    assert '[project.entry-points."replicator.topic_filters"]' in message
    flow = load_config({k: v for k, v in base.items() if "filter" not in k}).flows[0]
    with pytest.raises(ConfigError) as info:
        _ = flow.policy
    message = str(info.value)
    assert message.startswith(f"replication.policy.class = {POLICY}: no Python port")
    assert '[project.entry-points."replicator.replication_policies"]' in message
