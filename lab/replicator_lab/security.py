"""A secured local stack: TLS everywhere, SCRAM-SHA-512 or mTLS, and an authorizer.

`replicator stack up --security sasl_ssl|mtls` starts the same single-node KRaft
clusters with their one client listener secured, and everything a client needs
kept under `<data dir>/security/` (mode 0600 for keys and passwords):

- `ca.pem`: the stack's own CA (the truststore of brokers and clients alike);
- `<user>.pem`: key and certificate chain of a principal (the broker's names
  127.0.0.1, the only address the listeners advertise; clients' in `mtls` mode);
- `<user>.password`: `password=<secret>`, a properties file that configurations
  refer to with `${file:<path>:password}`, so no password is in them (`sasl_ssl`).

Principals are `User:<name>` in both modes: SCRAM users by name, certificates by
their CN (`ssl.principal.mapping.rules`). `StandardAuthorizer` runs with
`allow.everyone.if.no.acl.found=false`, and the only super user is `User:broker`,
the broker itself.

The controller listener (PORT+1) is TLS with client certificates required, not
PLAINTEXT: the controller authorizes the broker's own requests (registration,
heartbeats) too, and a PLAINTEXT listener would make its anonymous callers need
super-user rights, an unauthenticated admin port next to the secured one.
SCRAM cannot secure it (the controller would need the credentials it stores).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from replicator.config.properties import read_properties
from replicator_lab import certificates
from replicator_lab.errors import StackError

SecurityMode = Literal["sasl_ssl", "mtls"]
SECURITY_MODES: tuple[SecurityMode, ...] = ("sasl_ssl", "mtls")
#: The broker's principal: its own super user, and nobody else's.
BROKER_USER = "broker"
#: The principal `clients.properties` gives the replicator.
REPLICATOR_USER = "replicator"
#: The demo applications' and demo traffic's principal (`demo.properties`).
DEMO_USER = "demo"
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_SCRAM_ITERATIONS = 4096
#: `CN=replicator` -> `User:replicator`, the name a SCRAM user of the same role has.
PRINCIPAL_MAPPING = r"RULE:^CN=([^,]+)$/$1/,DEFAULT"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def parse_mode(text: str) -> SecurityMode:
    """`sasl_ssl` or `mtls` (as typed on the command line), else a StackError."""
    mode = text.lower().replace("-", "_")
    if mode not in SECURITY_MODES:
        raise StackError(
            f"security mode {text!r} is not supported; use one of {', '.join(SECURITY_MODES)}"
        )
    return mode


class StackSecurity:
    """The credentials of one secured stack and the settings built from them."""

    def __init__(self, mode: SecurityMode, folder: Path, hosts: Iterable[str] = ()) -> None:
        self.mode = mode
        self.folder = folder
        #: Addresses the brokers listen on besides 127.0.0.1: their certificate names them.
        self.hosts = tuple(hosts)

    # -- files -------------------------------------------------------------------------

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def ca_key_file(self) -> Path:
        return self.folder / "ca-key.pem"

    def keystore(self, user: str) -> Path:
        """Key and certificate chain of `user`, one PEM file."""
        return self.folder / f"{user}.pem"

    def password_file(self, user: str) -> Path:
        return self.folder / f"{user}.password"

    def password(self, user: str) -> str:
        path = self.password_file(user)
        if not path.exists():
            raise StackError(
                f"no password for user {user!r} in {path}; run `replicator stack up "
                f"--security {self.mode}` with the same --data-dir to create it"
            )
        return read_properties(path)["password"]

    @property
    def listener(self) -> str:
        """The client listener's name and security protocol."""
        return "SASL_SSL" if self.mode == "sasl_ssl" else "SSL"

    # -- creating credentials ----------------------------------------------------------

    def ensure(self) -> None:
        """The CA and the broker's and replicator's credentials, created once:
        a restarted stack keeps them, so existing client configurations keep working."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.ca_file.exists():
            certificates.write_ca(certificates.new_ca(), self.ca_key_file, self.ca_file)
        if not self.keystore(BROKER_USER).exists():
            self._write_keystore(BROKER_USER, server=True)
        for user in (BROKER_USER, REPLICATOR_USER, DEMO_USER):
            self.ensure_user(user)

    def ensure_user(self, user: str) -> None:
        """Create `user`'s credential file for this mode unless it exists. A SCRAM
        user must also be known to the brokers: `format_arguments` (at format time)
        or `register_scram_user` (on running brokers)."""
        if self.mode == "sasl_ssl":
            if not self.password_file(user).exists():
                certificates.write_private(
                    self.password_file(user), f"password={secrets.token_hex(24)}\n".encode()
                )
        elif not self.keystore(user).exists():
            self._write_keystore(user, server=False)

    def _write_keystore(self, user: str, *, server: bool) -> None:
        ca = certificates.load(self.ca_key_file)
        issued = certificates.issue(ca, user, server=server, addresses=self.hosts)
        certificates.write_private(self.keystore(user), issued.key_and_chain_pem(ca))

    def format_arguments(
        self, users: Iterable[str] = (BROKER_USER, REPLICATOR_USER, DEMO_USER)
    ) -> list[str]:
        """`kafka-storage format` arguments that create the SCRAM users (none for mTLS).
        The passwords are on the format command's line for its two seconds: the
        only way to give a broker its own inter-broker credentials before it starts."""
        if self.mode != "sasl_ssl":
            return []
        arguments = []
        for user in users:
            credential = f"{SCRAM_MECHANISM}=[name={user},password={self.password(user)}]"
            arguments += ["--add-scram", credential]
        return arguments

    def register_scram_user(self, user: str, bootstraps: Iterable[str]) -> None:
        """Create or update SCRAM user `user` on running brokers (as the broker's
        super user), e.g. a second principal for a test or a demo application."""
        self.ensure_user(user)
        upsert = UserScramCredentialUpsertion(
            user,
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, _SCRAM_ITERATIONS),
            self.password(user).encode(),
        )
        for bootstrap in bootstraps:
            admin = admin_for(bootstrap, self.client_settings(BROKER_USER))
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(timeout=30)

    # -- settings ----------------------------------------------------------------------

    def listener_settings(self, host: str, port: int, controller_port: int) -> dict[str, str]:
        """The listener lines of a node's server.properties (clients on `host`)."""
        listener = self.listener
        return {
            "listeners": f"{listener}://{host}:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised_listeners": f"{listener}://{host}:{port}",
            "protocol_map": f"{listener}:{listener},CONTROLLER:SSL",
            "inter_broker_listener": listener,
        }

    def broker_settings(self) -> dict[str, str]:
        """Everything else a secured node's server.properties adds."""
        settings = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore(BROKER_USER)),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            "ssl.principal.mapping.rules": PRINCIPAL_MAPPING,
            "listener.name.controller.ssl.client.auth": "required",
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{BROKER_USER}",
        }
        if self.mode == "sasl_ssl":
            settings |= {
                "sasl.enabled.mechanisms": SCRAM_MECHANISM,
                "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
                f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": (
                    f'{SCRAM_LOGIN_MODULE} required username="{BROKER_USER}" '
                    f'password="{self.password(BROKER_USER)}";'
                ),
            }
        else:
            settings["ssl.client.auth"] = "required"
        return settings

    def client_settings(self, user: str) -> dict[str, str]:
        """librdkafka settings of a client authenticated as `user`."""
        settings = {"security.protocol": self.listener, "ssl.ca.location": str(self.ca_file)}
        if self.mode == "sasl_ssl":
            settings |= {
                "sasl.mechanism": SCRAM_MECHANISM,
                "sasl.username": user,
                "sasl.password": self.password(user),
            }
        else:
            keystore = str(self.keystore(user))
            settings |= {"ssl.certificate.location": keystore, "ssl.key.location": keystore}
        return settings

    def mm2_settings(self, user: str) -> dict[str, str]:
        """The same client as MM2 users write it in `mm2.properties` (Java names),
        the password referred to with `${file:...}`, never written out."""
        settings = {
            "security.protocol": self.listener,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
        }
        if self.mode == "sasl_ssl":
            settings |= {
                "sasl.mechanism": SCRAM_MECHANISM,
                "sasl.jaas.config": (
                    f'{SCRAM_LOGIN_MODULE} required username="{user}" '
                    f'password="${{file:{self.password_file(user)}:password}}";'
                ),
            }
        else:
            settings |= {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.keystore(user)),
            }
        return settings


def admin_for(bootstrap: str, settings: Mapping[str, str]) -> AdminClient:
    """An admin client of the stack (its librdkafka logs kept to errors)."""
    return AdminClient({"bootstrap.servers": bootstrap, **settings, "log_level": 3})
