"""`${directory:path:key}`: Kafka's DirectoryConfigProvider (KIP-632), one file per secret."""

from __future__ import annotations

import logging

import pytest

from replicator.config import load_config
from replicator.config.properties import resolve_references
from replicator.errors import ConfigError

SECRET = "s3cr3t-Value"


@pytest.fixture
def secrets(tmp_path):
    """A Kubernetes Secret volume's layout: a file per key."""
    directory = tmp_path / "my-user"
    directory.mkdir()
    (directory / "password").write_text(SECRET)
    (directory / "username").write_text("replicator")
    return directory


def test_the_value_is_the_whole_file(secrets):
    resolved = resolve_references(
        {
            "a.sasl.jaas.config": "ScramLoginModule required "
            f'username="${{directory:{secrets}:username}}" '
            f'password="${{directory:{secrets}:password}}";',
            "plain": "no reference",
        }
    )
    assert resolved == {
        "a.sasl.jaas.config": f'ScramLoginModule required username="replicator" '
        f'password="{SECRET}";',
        "plain": "no reference",
    }


def test_content_is_kept_exactly_with_one_warning_for_a_final_newline(secrets, caplog):
    (secrets / "password").write_text(f"  {SECRET}\n")
    value = f"${{directory:{secrets}:password}}"
    with caplog.at_level(logging.WARNING, logger="replicator.config.properties"):
        resolved = resolve_references({"a.sasl.password": f"{value}|{value}"})
    assert resolved["a.sasl.password"] == f"  {SECRET}\n|  {SECRET}\n"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "a.sasl.password" in warnings[0]
    assert str(secrets / "password") in warnings[0]
    assert "printf" in warnings[0]
    assert "echo" in warnings[0]
    assert SECRET not in caplog.text


def test_no_warning_without_a_final_newline(secrets, caplog):
    with caplog.at_level(logging.WARNING, logger="replicator.config.properties"):
        resolve_references({"k": f"${{directory:{secrets}:password}}"})
    assert caplog.records == []


def test_relative_path_is_relative_to_the_working_directory(secrets, monkeypatch):
    monkeypatch.chdir(secrets.parent)
    assert resolve_references({"k": "${directory:my-user:password}"}) == {"k": SECRET}


def test_symlinked_files_as_in_a_kubernetes_secret_volume(tmp_path):
    # A Secret volume holds `password -> ..data/password`, `..data -> ..2026_11_27...`.
    volume = tmp_path / "volume"
    real = volume / "..2026_11_27_23_00_00.1"
    real.mkdir(parents=True)
    (real / "password").write_text(SECRET)
    (volume / "..data").symlink_to(real.name)
    (volume / "password").symlink_to("..data/password")
    assert resolve_references({"k": f"${{directory:{volume}:password}}"}) == {"k": SECRET}


def test_missing_directory_names_key_reference_path_and_fix(tmp_path):
    missing = tmp_path / "not-mounted"
    reference = f"${{directory:{missing}:password}}"
    with pytest.raises(ConfigError) as info:
        resolve_references({"dr.sasl.jaas.config": f'x password="{reference}";'})
    message = str(info.value)
    assert message.startswith(f"dr.sasl.jaas.config: {reference}: directory {missing} ")
    assert "does not exist" in message
    assert "mount the secret there" in message


def test_missing_file_names_the_file_and_what_the_directory_holds(secrets):
    reference = f"${{directory:{secrets}:pasword}}"
    with pytest.raises(ConfigError) as info:
        resolve_references({"a.ssl.key.password": reference})
    message = str(info.value)
    assert message.startswith(f"a.ssl.key.password: {reference}: {secrets / 'pasword'} ")
    assert "holds: password, username" in message
    assert "write the secret to a file named pasword" in message
    assert SECRET not in message


def test_a_subdirectory_is_not_a_file(secrets):
    (secrets / "nested").mkdir()
    with pytest.raises(ConfigError, match="is not a regular file"):
        resolve_references({"k": f"${{directory:{secrets}:nested}}"})


@pytest.mark.parametrize("name", ["sub/password", "..", "."])
def test_the_key_must_be_a_file_name(secrets, name):
    with pytest.raises(ConfigError, match="must be the name of a file directly in"):
        resolve_references({"k": f"${{directory:{secrets.parent}:{name}}}"})


@pytest.mark.parametrize("body", ["justakey", ":password", "/run/secrets:"])
def test_malformed_reference(body):
    with pytest.raises(ConfigError, match=r"k: expected \$\{directory:path:key\}"):
        resolve_references({"k": f"${{directory:{body}}}"})


def test_content_that_is_not_utf8(secrets):
    (secrets / "binary").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        resolve_references({"k": f"${{directory:{secrets}:binary}}"})


def test_unsupported_provider_lists_directory():
    with pytest.raises(ConfigError) as info:
        resolve_references({"k": "${vault:secret/data:password}"})
    assert "${directory:path:key}" in str(info.value)


def test_the_loader_resolves_it(secrets, tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = a, b\n"
        "a.bootstrap.servers = a:9092\n"
        "b.bootstrap.servers = b:9092\n"
        "a->b.enabled = true\n"
        "a.security.protocol = SASL_PLAINTEXT\n"
        "a.sasl.mechanism = SCRAM-SHA-512\n"
        "a.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="replicator" password="${{directory:{secrets}:password}}";\n'
    )
    config = load_config(path)
    consumer = config.flows[0].source.consumer
    assert consumer["sasl.username"] == "replicator"
    assert consumer["sasl.password"] == SECRET
    assert SECRET not in repr(config)
