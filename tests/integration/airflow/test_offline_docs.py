"""Data Docs with no internet (issue 16 item 1): every page Great Expectations wrote
for a verification run, served through the DR status page's app, loads each
script, stylesheet, font and image from the plugin (the pinned npm packages that
`make setup` installs), none from a CDN; the two scripts GX pins by SRI hash are
the very files it names; the assets route serves only those packages. The browser
test renders such a page in Chromium and watches its requests."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient

from replicator.statestore import StateStore

from helpers.data_docs import verification_with_data_docs

_BASE = "http://testserver"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """A verification run with a real GX site: (state URL, run id, site folder)."""
    folder = tmp_path_factory.mktemp("offline-docs")
    url = f"sqlite:///{folder / 'state.db'}"
    store = StateStore(url)
    try:
        run_id = verification_with_data_docs(store, folder / "results", "primary->dr", "orders")
        index = Path(store.runs.get(run_id).details["data_docs"])
    finally:
        store.close()
    yield url, run_id, index.parent


@pytest.fixture
def client(airflow_home: Path, site: tuple[str, str, Path], tmp_path: Path) -> TestClient:
    # Late imports: Airflow reads its settings (and puts plugins/ on sys.path) at import.
    from replicator_airflow.hooks import ReplicatorSettings  # noqa: PLC0415
    from replicator_airflow.status_page import create_app  # noqa: PLC0415

    state_url = site[0]
    return TestClient(create_app(lambda: ReplicatorSettings(str(tmp_path / "none"), state_url)))


@pytest.fixture
def offline_docs(airflow_home: Path) -> ModuleType:
    import replicator_airflow.offline_docs  # noqa: PLC0415 - see `client`

    return replicator_airflow.offline_docs


def _loads(page: str) -> list[tuple[str, str | None]]:
    """(address, SRI hash or None) of each script and stylesheet of `page` (not its
    favicon link: GX's validation pages point it one folder short, within the site)."""
    found = []
    for tag in re.findall(r"<script\b[^>]*>|<link\b[^>]*stylesheet[^>]*>", page):
        address = re.search(r'\b(?:src|href)="([^"]+)"', tag)
        integrity = re.search(r'\bintegrity="([^"]+)"', tag)
        if address:
            found.append((address[1], integrity[1] if integrity else None))
    return found


def test_every_page_loads_its_assets_from_the_plugin(
    client: TestClient, offline_docs: ModuleType, site: tuple[str, str, Path]
) -> None:
    _, run_id, folder = site
    pages = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.html"))
    assert "index.html" in pages and any(p.startswith("validations/") for p in pages), pages
    fetched: dict[str, bytes] = {}
    for name in pages:
        written = (folder / name).read_text()
        assert offline_docs.external_loads(written), f"GX wrote {name} with no CDN asset?"
        page_url = f"{_BASE}/runs/{run_id}/data-docs/{name}"
        served = client.get(page_url)
        assert served.status_code == 200, (name, served.text)
        assert offline_docs.external_loads(served.text) == [], name
        assert "logo-long.png" in served.text  # GX's S3 logo, now the site's own
        for address, integrity in _loads(served.text):
            url = urljoin(page_url, address)
            assert urlsplit(url).netloc == "testserver", (name, address)
            if url not in fetched:
                response = client.get(url)
                assert response.status_code == 200, (name, address, response.text)
                fetched[url] = response.content
            if integrity:
                algorithm, digest = integrity.split("-", 1)
                actual = base64.b64encode(hashlib.new(algorithm, fetched[url]).digest()).decode()
                assert actual == digest, f"{address}: not the file GX pins ({integrity})"
    vendored = {u for u in fetched if f"/{offline_docs.ASSETS_ROUTE}/" in u}
    assert len(vendored) == len(set(offline_docs.VENDORED.values())), sorted(vendored)
    # Font Awesome's stylesheet loads its webfonts beside it: served too.
    solid = "@fortawesome/fontawesome-free/webfonts/fa-solid-900.woff2"
    assert client.get(f"/{offline_docs.ASSETS_ROUTE}/{solid}").status_code == 200


def test_assets_route_serves_only_the_pinned_packages(
    client: TestClient, offline_docs: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = f"/{offline_docs.ASSETS_ROUTE}"
    assert client.get(f"{route}/jquery/dist/jquery.min.js").status_code == 200
    for outside in (
        "d3-array/package.json",  # installed (vega needs it) but not served
        "..%2F..%2Fpackage-lock.json",
        "%2Fetc%2Fpasswd",
        "jquery/..%2F..%2F.installed",
    ):
        assert client.get(f"{route}/{outside}").status_code == 404, outside
    monkeypatch.setenv(offline_docs.ASSETS_ENV, str(tmp_path / "nothing"))
    missing = client.get(f"{route}/jquery/dist/jquery.min.js")
    assert missing.status_code == 404 and "make setup" in missing.text
