"""What Airflow learns about this distribution as a provider (the
`apache_airflow_provider` entry point): the `replicator` connection type, with the
fields of its form.

Declared here rather than by `get_connection_form_widgets`/`get_ui_field_behaviour`
on the hook: Airflow 3.2+ deprecates those (they import wtforms) in favour of
`conn-fields` and `ui-field-behaviour` in the provider info, which the connection
form reads without importing the hook. The fields are the keys `ReplicatorHook`
reads from the connection's extra; the password is the state store's and the
configuration's `${conn:password}`.

The DR status plugin is registered through the `airflow.plugins` entry point, not
listed here: Airflow would load it a second time from the provider.
"""

from __future__ import annotations

from typing import Any

#: The distribution's name: Airflow checks that it matches the provider's.
PACKAGE = "replicator"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": PACKAGE,
        "name": "Kafka DR replicator",
        "description": "Kafka disaster recovery: replication, failover and failback, "
        "verification, and the DR status page.",
        "connection-types": [
            {
                "connection-type": "replicator",
                "hook-class-name": "replicator_airflow.hooks.ReplicatorHook",
                "hook-name": "Kafka DR replicator",
                "conn-fields": {
                    "config": {
                        "label": "Configuration file",
                        "description": "Path of the replicator's mm2.properties, as the "
                        "workers see it",
                        "schema": {"type": "string", "minLength": 1},
                    },
                    "state_url": {
                        "label": "State store URL",
                        "description": "SQLAlchemy URL of the DR state store, without its "
                        "password (e.g. postgresql+psycopg://dr@db/dr); empty: "
                        "$REPLICATOR_STATE_URL",
                        "schema": {"type": ["string", "null"]},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "port", "login", "schema", "extra"],
                    "relabeling": {"password": "State store password"},
                    "placeholders": {"password": "kept out of the URL, never shown"},
                },
            }
        ],
    }
