"""Secured clusters for the tests of the secured path (issue 14), started only when such
a test runs, on free ports and in a folder of their own: `primary` and `dr` with
SASL_SSL (SCRAM-SHA-512) or mTLS, StandardAuthorizer on, no ACL means no access.

The stack's own super user (`admin`) sets tests up (topics, records, inspection);
what a test proves runs as the principal under test, with only its planned ACLs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from replicator.acls.apply import apply_rules
from replicator.acls.plan import AclRule
from replicator_lab import LocalStack
from replicator_lab.client_config import CLIENTS_FILE, client_properties
from replicator_lab.security import BROKER_USER

from helpers.kafka import own_cluster_pair


@dataclass(frozen=True)
class SecuredPair:
    """A secured `primary` and `dr`, and the means to add principals to them."""

    stack: LocalStack

    @property
    def primary(self) -> str:
        return self.stack.bootstrap("primary")

    @property
    def dr(self) -> str:
        return self.stack.bootstrap("dr")

    @property
    def clients_file(self) -> Path:
        """The replicator's configuration `stack up` wrote, its ACLs granted."""
        return self.stack.data_dir / CLIENTS_FILE

    def admin(self, cluster: str) -> dict[str, str]:
        """The super user's client settings (bootstrap servers included)."""
        return self.stack.client_settings(cluster)

    def user(self, name: str) -> dict[str, str]:
        """Client settings (no bootstrap servers) of principal `User:<name>`, created
        on both clusters if new; it has no ACL until a test grants some."""
        security = self.stack.security
        assert security is not None
        if security.mode == "sasl_ssl":
            security.register_scram_user(name, [self.primary, self.dr])
        else:
            security.ensure_user(name)
        return security.client_settings(name)

    def grant(self, rules: list[AclRule]) -> None:
        apply_rules(rules, {name: self.admin(name) for name in ("primary", "dr")})

    def config_as(self, user: str, path: Path, *lines: str) -> Path:
        """The stack's clients.properties with `User:<user>` (created if new, with no
        ACL yet) in place of the replicator's principal, `lines` added (later keys
        win), written to `path`. SASL_SSL only: the user is in the JAAS line."""
        self.user(user)
        security = self.stack.security
        assert security is not None and security.mode == "sasl_ssl"
        text = (
            self.clients_file.read_text()
            .replace('username="replicator"', f'username="{user}"')
            .replace(str(security.password_file("replicator")), str(security.password_file(user)))
        )
        path.write_text(text + "\n".join(lines) + "\n")
        return path

    def operator_config(self, ca_file: str, password_folder: str, password_key: str) -> str:
        """The replicator's clients.properties as an operator writes it for a container:
        the CA certificate at `ca_file`, the password read by Kafka's
        DirectoryConfigProvider from `<password_folder>/<password_key>` (a mounted
        Secret's layout), no path of this machine left."""
        security = self.stack.security
        assert security is not None and security.mode == "sasl_ssl"
        text = self.clients_file.read_text(encoding="utf-8")
        text = text.replace(str(security.ca_file), ca_file).replace(
            f"${{file:{security.password_file('replicator')}:password}}",
            f"${{directory:{password_folder}:{password_key}}}",
        )
        text = text.replace(
            "config.providers = file",
            "config.providers = directory\nconfig.providers.directory.class = "
            "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
        )
        return "\n".join(
            line for line in text.splitlines() if not line.startswith("config.providers.file.")
        )

    def passwords(self) -> dict[str, bytes]:
        """The SCRAM password of every principal the stack or a test created (the
        secret-leak checks look for each)."""
        security = self.stack.security
        assert security is not None
        folder = security.password_file("replicator").parent
        return {
            path.stem: security.password(path.stem).encode()
            for path in sorted(folder.glob("*.password"))
        }

    def write_admin_config(self, path: Path) -> Path:
        """An MM2 properties file of the super user, for `replicator acls apply`."""
        path.write_text(client_properties(self.stack, BROKER_USER), encoding="utf-8")
        return path

    def end_offsets(self, cluster: str, topic: str, partitions: int) -> list[int] | None:
        """High watermarks of `topic`'s partitions; None while it does not exist yet or
        its leadership settles (a new topic)."""
        consumer = Consumer({**self.admin(cluster), "group.id": "secured-end-offsets"})
        try:
            if topic not in consumer.list_topics(timeout=10).topics:
                return None
            return [
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)
            ]
        except KafkaException:
            return None
        finally:
            consumer.close()


def only_topic(flow: str, *topics: str) -> str:
    """The properties line limiting `flow` to `topics` alone (their dots escaped for
    the regex, and that backslash for the properties file): the pair is shared by a
    worker's tests, whose demo topics the flow would otherwise pick up too."""
    escaped = "|".join(topic.replace(".", "\\\\.") for topic in topics)
    return f"{flow}.topics = {escaped}"


@pytest.fixture(scope="session")
def secured_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredPair]:
    """SASL_SSL with SCRAM-SHA-512, started with the same code as
    `replicator stack up --security sasl_ssl`."""
    with own_cluster_pair(tmp_path_factory.mktemp("secured"), security="sasl_ssl") as stack:
        yield SecuredPair(stack)


@pytest.fixture(scope="session")
def mtls_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredPair]:
    """TLS with client certificates required, as `replicator stack up --security mtls`."""
    with own_cluster_pair(tmp_path_factory.mktemp("mtls"), security="mtls") as stack:
        yield SecuredPair(stack)
