"""Great Expectations' Data Docs without the internet: the assets its pages load
from CDNs, served by the DR status plugin, and the pages rewritten to use them.

GX 1.x writes pages that load Bootstrap, jQuery, Popper, bootstrap-table,
bootstrap-datepicker, Font Awesome, bootstrap-dark and Vega from jsDelivr,
cdnjs, unpkg, the jQuery and Bootstrap CDNs, and its logo from its own S3
bucket. On a DR site without internet such a page renders as a bare list with
an empty results table (bootstrap-table fills it). The same files, pinned, come
from the npm registry (`include/vendor/data-docs/package-lock.json`, installed
by `make setup` with `npm ci` under `.cache/vendor/data-docs/`), and this
module serves them under `data-docs-assets/` of the plugin's app.

The pages are rewritten as they are served, not configured in GX: GX's Jinja
loader puts its own templates first (`DefaultJinjaView`: the package's loader,
then `plugins/custom_data_docs/views`), so a custom view can add templates but
cannot replace `page.j2`, `js_script_imports.j2` or `top_navbar.j2`, which hold
the CDN addresses. Rewriting when serving also covers every site written
before, keeps the Spark job and the suites ignorant of where the plugin serves
its files, and keeps one copy of the assets instead of one per run. Each CDN
address maps to the file of the pinned package (`VENDORED`; the versions are the
ones GX names, and the two scripts GX pins by SRI hash are byte-identical, so
their `integrity` attributes still hold); the S3 logo becomes the site's own
`static/images/logo-long.png`. A page that still names an external asset after
the rewrite (a GX upgrade added one) is logged with what to add here.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, Response

log = logging.getLogger(__name__)

#: Where the installed packages are (`node_modules`); the default is `make setup`'s.
ASSETS_ENV = "REPLICATOR_DATA_DOCS_ASSETS"
DEFAULT_ASSETS = (
    Path(__file__).resolve().parents[2] / ".cache" / "vendor" / "data-docs" / "node_modules"
)
#: The route (under the plugin's app) that serves them.
ASSETS_ROUTE = "data-docs-assets"
#: Folders from the app's root to the folder of a Data Docs site's index.html
#: (`runs/<run id>/data-docs/`, the status page's route for a run's Data Docs).
SITE_DEPTH = 3

#: Each address GX 1.24's pages load an asset from -> that file in the pinned package.
VENDORED: dict[str, str] = {
    "https://cdn.jsdelivr.net/npm/vega@5": "vega/build/vega.min.js",
    "https://cdn.jsdelivr.net/npm/vega-lite@5": "vega-lite/build/vega-lite.min.js",
    "https://cdn.jsdelivr.net/npm/vega-embed@6": "vega-embed/build/vega-embed.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": (
        "@fortawesome/fontawesome-free/css/all.min.css"
    ),
    "https://code.jquery.com/jquery-3.7.1.min.js": "jquery/dist/jquery.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": (
        "popper.js/dist/umd/popper.min.js"
    ),
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": (
        "bootstrap/dist/js/bootstrap.min.js"
    ),
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": (
        "bootstrap/dist/css/bootstrap.min.css"
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": (
        "bootstrap-table/dist/bootstrap-table.min.js"
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": (
        "bootstrap-table/dist/bootstrap-table.min.css"
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.min.js": (
        "bootstrap-table/dist/extensions/filter-control/bootstrap-table-filter-control.min.js"
    ),
    # GX names 1.19.0 for the filter-control styles only; 1.19.1's are the same extension's.
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.css": (
        "bootstrap-table/dist/extensions/filter-control/bootstrap-table-filter-control.css"
    ),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.min.css": (
        "bootstrap-table/dist/extensions/filter-control/bootstrap-table-filter-control.min.css"
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/"
    "bootstrap-datepicker.min.js": "bootstrap-datepicker/dist/js/bootstrap-datepicker.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/"
    "bootstrap-datepicker.min.css": "bootstrap-datepicker/dist/css/bootstrap-datepicker.min.css",
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/"
    "bootstrap-prefers-dark.css": "@forevolve/bootstrap-dark/dist/css/bootstrap-prefers-dark.css",
}
#: The packages served (a file of theirs may load others, e.g. Font Awesome's webfonts).
PACKAGES = frozenset(
    "/".join(path.split("/")[:2]) if path.startswith("@") else path.split("/")[0]
    for path in VENDORED.values()
)
#: GX's logos on its S3 bucket (with a tracking query string): the site's own copy.
_GX_IMAGES = re.compile(
    r"https://great-expectations-web-assets\.s3\.us-east-2\.amazonaws\.com/"
    r"[\w.-]+\.(?:png|svg)(?:\?[^\"'\s)]*)?"
)
_SITE_LOGO = "static/images/logo-long.png"
#: Addresses a page or stylesheet loads by itself (anchors are links, not loads).
_LOADED = re.compile(
    r"<(?:script|link|img|iframe|source)\b[^>]*?\b(?:src|href)=[\"'](https?://[^\"']+)"
    r"|url\(\s*[\"']?(https?://[^\"')]+)",
    re.IGNORECASE,
)
_ADDRESSES = re.compile("|".join(re.escape(url) for url in sorted(VENDORED, key=len, reverse=True)))
_REWRITTEN = (".html", ".css")


def assets_root() -> Path:
    """The installed packages: `$REPLICATOR_DATA_DOCS_ASSETS`, else `make setup`'s."""
    return Path(os.environ.get(ASSETS_ENV) or DEFAULT_ASSETS)


def rewrite(text: str, depth: int) -> str:
    """`text` (a page or a stylesheet `depth` folders below the app's root, its
    site's index.html being `SITE_DEPTH` below) with every CDN address replaced by
    the plugin's copy and GX's S3 logo by the site's own, both as relative paths."""
    up = "../" * depth
    local = _ADDRESSES.sub(lambda found: f"{up}{ASSETS_ROUTE}/{VENDORED[found[0]]}", text)
    return _GX_IMAGES.sub("../" * (depth - SITE_DEPTH) + _SITE_LOGO, local)


def external_loads(text: str) -> list[str]:
    """The external addresses a page or stylesheet would load (scripts, styles,
    images, fonts), in order; links to other sites are not loads."""
    return [script or css for script, css in _LOADED.findall(text)]


def data_docs_response(file: Path, path: str) -> Response:
    """The file `path` of a run's Data Docs site (`file` on disk): pages and styles
    rewritten to load nothing from outside, anything else as it is."""
    if file.suffix not in _REWRITTEN:
        return FileResponse(file)
    text = rewrite(file.read_text(encoding="utf-8"), SITE_DEPTH + path.count("/"))
    left = external_loads(text)
    if left:
        log.warning(
            "Data Docs %s still load %s from outside: add each to VENDORED in %s and its "
            "package to include/vendor/data-docs/package.json",
            file,
            ", ".join(sorted(set(left))),
            __file__,
        )
    media = "text/html" if file.suffix == ".html" else "text/css"
    return Response(text, media_type=f"{media}; charset=utf-8")


def asset_file(path: str, root: Path | None = None) -> Path:
    """The installed file `path` of a served package (resolved, so neither `..` nor
    a symlink leads out); HTTPException 404 naming the fix when it is missing."""
    base = (root or assets_root()).resolve()
    wanted = (base / path).resolve()
    package = wanted.relative_to(base).parts[:2] if wanted.is_relative_to(base) else ()
    served = any("/".join(package[:n]) in PACKAGES for n in (1, 2))
    if not served:
        raise HTTPException(404, f"{path!r} is not one of the Data Docs assets")
    if not wanted.is_file():
        raise HTTPException(
            404,
            f"Data Docs asset {path!r} is not installed under {base}: run `make setup` "
            f"(it installs include/vendor/data-docs with npm ci), or set ${ASSETS_ENV}",
        )
    return wanted


def router() -> APIRouter:
    """The route that serves the assets, for the status page's app to include."""
    routes = APIRouter()

    @routes.get(f"/{ASSETS_ROUTE}/{{path:path}}", name="data_docs_asset")
    def data_docs_asset(path: str) -> FileResponse:
        # Pinned versions: a browser may keep them for a day.
        return FileResponse(asset_file(path), headers={"Cache-Control": "max-age=86400"})

    return routes
