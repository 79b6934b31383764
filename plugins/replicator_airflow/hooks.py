"""Where the replicator's configuration and state store are, for Airflow tasks.

An Airflow connection (default id `replicator_default`, any type) holds them in
its extra: `{"config": "/path/mm2.properties", "state_url": "postgresql://..."}`;
its password, if set, is the state store's password (kept out of the URL so it
never shows in the UI). Without that connection, `$REPLICATOR_CONFIG` and
`$REPLICATOR_STATE_URL` are used, as `make run` sets them.

The connection also keeps Kafka secrets where Airflow keeps secrets (its
metadata DB, encrypted, or a secrets backend) rather than in files beside the
configuration: the configuration names them `${conn:password}` (the password
field) or `${conn:NAME}` (entry NAME of the extra's `"secrets"` object), and
`ReplicatorSettings.load_config` resolves them. Never from a DAG's params: whoever
may trigger a DAG may not choose credentials.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.sdk.log import mask_secret
from sqlalchemy.engine import make_url

from replicator.config import ReplicatorConfig, load_config
from replicator.errors import ReplicatorError
from replicator.statestore import STATE_URL_ENV

CONFIG_ENV = "REPLICATOR_CONFIG"


@dataclass(frozen=True)
class ReplicatorSettings:
    config: str
    #: May hold the state store's password (the connection's): never in the repr.
    state_url: str | None = field(repr=False)
    #: What the configuration's `${conn:NAME}` references resolve to: `password`, and
    #: the entries of the extra's "secrets". Never shown (no repr).
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def load_config(self) -> ReplicatorConfig:
        """The configuration, with the connection's secrets it references."""
        return load_config(Path(self.config), connection=self.secrets)


class ReplicatorHook(BaseHook):
    conn_name_attr = "replicator_conn_id"
    default_conn_name = "replicator_default"
    conn_type = "replicator"
    hook_name = "Kafka DR replicator"

    def __init__(self, replicator_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.replicator_conn_id = replicator_conn_id

    def settings(self) -> ReplicatorSettings:
        try:
            connection = self.get_connection(self.replicator_conn_id)
        except AirflowNotFoundException:
            return _from_environment()
        extra = connection.extra_dejson
        if "config" not in extra:
            raise ReplicatorError(
                f'Airflow connection {self.replicator_conn_id!r} has no "config" in its '
                "extra; set it to the path of the replicator's mm2.properties"
            )
        state_url = extra.get("state_url")
        if state_url and connection.password:
            state_url = (
                make_url(state_url)
                .set(password=connection.password)
                .render_as_string(hide_password=False)
            )
        secrets = self._extra_secrets(extra.get("secrets", {}))
        if connection.password:
            secrets["password"] = connection.password
        return ReplicatorSettings(extra["config"], state_url, secrets)

    def _extra_secrets(self, given: object) -> dict[str, str]:
        """The extra's "secrets" (name -> value), masked in every log like the
        password is (Airflow masks the extra only as a whole)."""
        if (
            not isinstance(given, dict)
            or "password" in given
            or not all(isinstance(value, str) for value in given.values())
        ):
            raise ReplicatorError(
                f'Airflow connection {self.replicator_conn_id!r}: "secrets" in its extra must '
                "be an object of names to strings (the configuration's ${conn:NAME}); "
                "`password` is the password field's"
            )
        for value in given.values():
            mask_secret(value)
        return dict(given)


def _from_environment() -> ReplicatorSettings:
    config = os.environ.get(CONFIG_ENV)
    if not config:
        raise ReplicatorError(
            f"no Airflow connection 'replicator_default' and no ${CONFIG_ENV}: create the "
            'connection (extra {"config": "/path/mm2.properties"}) or set the variable'
        )
    return ReplicatorSettings(config, os.environ.get(STATE_URL_ENV))
