"""`replicator import strimzi`: the command around `replicator.config.strimzi`."""

from __future__ import annotations

import pytest

from replicator.cli import main
from replicator.config import load_config

RESOURCE = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: my-mirror-maker-2
spec:
  replicas: 3
  connectCluster: dr
  clusters:
  - alias: primary
    bootstrapServers: primary-kafka-bootstrap:9093
    tls:
      trustedCertificates:
      - {secretName: primary-cluster-ca-cert, certificate: ca.crt}
    authentication:
      type: scram-sha-512
      username: mm2
      passwordSecret: {secretName: mm2-user, password: password}
  - alias: dr
    bootstrapServers: dr-kafka-bootstrap:9093
    tls:
      trustedCertificates:
      - {secretName: dr-cluster-ca-cert, certificate: ca.crt}
    authentication:
      type: scram-sha-512
      username: mm2
      passwordSecret: {secretName: mm2-user, password: password}
  mirrors:
  - sourceCluster: primary
    targetCluster: dr
    sourceConnector: {tasksMax: 4}
    checkpointConnector: {}
    topicsPattern: "orders.*"
"""

OAUTH = RESOURCE.replace(
    """    authentication:
      type: scram-sha-512
      username: mm2
      passwordSecret: {secretName: mm2-user, password: password}
  - alias: dr""",
    """    authentication:
      type: oauth
      tokenEndpointUri: https://sso.example/token
      clientId: mm2
      clientSecret: {secretName: mm2-oauth, key: secret}
  - alias: dr""",
)


@pytest.fixture
def resource(tmp_path):
    path = tmp_path / "kafkamirrormaker2.yaml"
    path.write_text(RESOURCE)
    return path


def test_prints_the_properties_to_stdout_and_the_notes_to_stderr(resource, capsys):
    assert main(["import", "strimzi", str(resource), "--secrets-dir", "/run/secrets"]) == 0
    out, err = capsys.readouterr()
    assert "clusters = primary, dr\n" in out
    assert "primary->dr.tasks.max = 4\n" in out
    assert "${directory:/run/secrets/mm2-user:password}" in out
    assert "note: spec.replicas = 3:" in err
    assert "mount Secret mm2-user at /run/secrets/mm2-user (reads password)" in err
    assert "note:" not in out.replace("# ", "")


def test_output_file_loads_with_the_secrets_mounted(resource, tmp_path, capsys):
    secrets = tmp_path / "secrets"
    (secrets / "mm2-user").mkdir(parents=True)
    (secrets / "mm2-user" / "password").write_text("pw")
    output = tmp_path / "conf" / "mm2.properties"
    argv = ["import", "strimzi", str(resource), "--output", str(output)]
    assert main([*argv, "--secrets-dir", str(secrets)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert f"my-mirror-maker-2: written to {output}" in err
    flow = load_config(output).flows[0]
    assert flow.name == "primary->dr"
    assert flow.tasks_max == 4
    assert flow.source.consumer["sasl.password"] == "pw"
    assert flow.source.consumer["security.protocol"] == "SASL_SSL"


def test_refuses_to_overwrite_without_force(resource, tmp_path, capsys):
    output = tmp_path / "mm2.properties"
    output.write_text("keep me\n")
    assert main(["import", "strimzi", str(resource), "-o", str(output)]) == 2
    _, err = capsys.readouterr()
    assert err.startswith(f"replicator: error: {output} exists; add --force")
    assert output.read_text() == "keep me\n"
    assert main(["import", "strimzi", str(resource), "-o", str(output), "--force"]) == 0
    assert output.read_text().startswith("# Converted from Strimzi KafkaMirrorMaker2")


def test_an_oauth_resource_exits_2_with_the_error_on_stderr(tmp_path, capsys):
    path = tmp_path / "oauth.yaml"
    path.write_text(OAUTH)
    output = tmp_path / "mm2.properties"
    assert main(["import", "strimzi", str(path), "--output", str(output)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(
        "replicator: error: spec.clusters[0].authentication.type = oauth (cluster primary): "
        "cannot be mapped"
    )
    assert "by hand" in err
    assert len(err.strip().splitlines()) == 1
    assert not output.exists()


def test_name_picks_one_of_several(tmp_path, capsys):
    path = tmp_path / "two.yaml"
    path.write_text(RESOURCE + "---\n" + RESOURCE.replace("my-mirror-maker-2", "second"))
    assert main(["import", "strimzi", str(path)]) == 2
    assert "choose one with --name NAME" in capsys.readouterr().err
    assert main(["import", "strimzi", str(path), "--name", "second"]) == 0
    assert "Strimzi KafkaMirrorMaker2 second " in capsys.readouterr().out


def test_a_missing_file_exits_2(tmp_path, capsys):
    assert main(["import", "strimzi", str(tmp_path / "nope.yaml")]) == 2
    assert "replicator: error: cannot read" in capsys.readouterr().err
