"""Registers the DR status page with Airflow: the app under `/dr-status`, and an
entry in the navigation that shows it inside the Airflow UI.

Airflow registers it from the installed distribution's `airflow.plugins` entry
point (`pyproject.toml`), wherever Airflow's plugins folder is; `plugins/.airflowignore`
keeps Airflow from loading this package's files from the folder a second time when
the checkout's `plugins/` is that folder (`make run`, the tests).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from replicator_airflow.status_page import app

#: Where the page is served, under the Airflow API server's base URL.
URL_PREFIX = "/dr-status"


class ReplicatorDrPlugin(AirflowPlugin):
    name = "replicator_dr"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "DR status"}]  # noqa: RUF012
    external_views = [  # noqa: RUF012 - Airflow's declared plugin attributes
        {
            "name": "DR status",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "url_route": "dr-status",
            "category": "Kafka DR",
        }
    ]
