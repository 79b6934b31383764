"""Where the replicator's configuration and state store are, for Airflow tasks.

An Airflow connection (default id `replicator_default`, any type) holds them in
its extra: `{"config": "/path/mm2.properties", "state_url": "postgresql://..."}`;
its password, if set, is the state store's password (kept out of the URL so it
never shows in the UI). Without that connection, `$REPLICATOR_CONFIG` and
`$REPLICATOR_STATE_URL` are used, as `make run` sets them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from sqlalchemy.engine import make_url

from replicator.errors import ReplicatorError
from replicator.statestore import STATE_URL_ENV

CONFIG_ENV = "REPLICATOR_CONFIG"


@dataclass(frozen=True)
class ReplicatorSettings:
    config: str
    state_url: str | None


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
        return ReplicatorSettings(extra["config"], state_url)


def _from_environment() -> ReplicatorSettings:
    config = os.environ.get(CONFIG_ENV)
    if not config:
        raise ReplicatorError(
            f"no Airflow connection 'replicator_default' and no ${CONFIG_ENV}: create the "
            'connection (extra {"config": "/path/mm2.properties"}) or set the variable'
        )
    return ReplicatorSettings(config, os.environ.get(STATE_URL_ENV))
