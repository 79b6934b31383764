"""Helpers for the end-to-end browser test: Debian's headless Chromium driven by
Selenium through Debian's chromedriver, the Airflow login, the DR status page, the
requests the pages made (Chrome's performance log)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

from selenium import webdriver
from selenium.common.exceptions import (
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from helpers.data_docs import table_names

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[2] / ".data" / "test-artifacts" / "browser"
_WAIT_S = 60.0


@contextmanager
def chromium(downloads: Path) -> Iterator[WebDriver]:
    """A headless Chromium (1280x1024), quit at the end."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    assert not missing, f"{', '.join(missing)} missing: `make setup` installs chromium"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1024",
        f"--user-data-dir={downloads / 'chromium-profile'}",
    ):
        options.add_argument(argument)
    # Every request of the pages (Network.requestWillBeSent), for `requests_made`.
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    service = Service(str(CHROMEDRIVER), log_output=str(downloads / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


def full_page_screenshot(driver: WebDriver, path: Path, width: int) -> None:
    """A screenshot of the whole page at `width` CSS pixels. The viewport is set through
    the DevTools protocol's device-metrics override, not by resizing the window: a
    headless window cannot grow past its virtual screen, which differs between hosts."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
    )
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        shown = driver.execute_script("return [window.innerWidth, window.innerHeight]")
        assert shown == [width, height], f"viewport {shown}, page {width}x{height}"
        assert driver.save_screenshot(str(path)), f"screenshot {path} not saved"
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


class Screenshots:
    """Numbered screenshots of each stage in `folder` (emptied first)."""

    def __init__(self, folder: Path = ARTIFACTS) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.png"):
            old.unlink()
        self.paths: list[Path] = []

    def take(self, driver: WebDriver, stage: str) -> Path:
        path = self.folder / f"{len(self.paths) + 1:02d}-{stage}.png"
        assert driver.save_screenshot(str(path)), f"screenshot {path} not saved"
        self.paths.append(path)
        return path

    def report(self) -> None:
        sys.stdout.write("\nbrowser test screenshots:\n")
        sys.stdout.writelines(f"  {path}\n" for path in self.paths)


def log_in(driver: WebDriver, url: str, username: str, password: str) -> None:
    """Sign in with the simple auth manager's form; returns on the Airflow home page."""
    driver.get(f"{url}/")
    wait = WebDriverWait(driver, _WAIT_S)
    wait.until(lambda d: d.find_elements(By.NAME, "username"))
    driver.find_element(By.NAME, "username").send_keys(username)
    driver.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    try:
        wait.until(lambda d: "/auth/login" not in d.current_url and "Dags" in _text(d))
    except TimeoutException:
        raise AssertionError(f"login to {url} failed; the page says: {_text(driver)}") from None


def show(driver: WebDriver, page: str, text: str, timeout: float = 30.0) -> bool:
    """Open `page` and give its scripts `timeout` seconds to render `text` (for a
    screenshot of a rendered page; False if it did not show)."""
    driver.get(page)
    try:
        WebDriverWait(driver, timeout).until(lambda d: text.lower() in _text(d).lower())
    except TimeoutException:
        return False
    return True


def active_cluster_cell(driver: WebDriver, app: str) -> str | None:
    """The text of `<tr data-app=APP> <td class="active-cluster">`, None while absent."""
    try:
        cells = driver.find_elements(By.CSS_SELECTOR, f'tr[data-app="{app}"] td.active-cluster')
        return cells[0].text.strip() if cells else None
    except StaleElementReferenceException:
        return None  # the page swapped its content while we read it


def expect_active_cluster(driver: WebDriver, page: str, app: str, cluster: str) -> None:
    """Open `page` and wait until it shows `cluster` as `app`'s active cluster."""
    driver.get(page)
    seen: list[str | None] = []

    def shown(d: WebDriver) -> bool:
        seen.append(active_cluster_cell(d, app))
        if seen[-1] == cluster:
            return True
        if len(seen) % 20 == 0:
            d.refresh()  # the page refreshes itself, but never trust that alone
        return False

    try:
        WebDriverWait(driver, _WAIT_S, poll_frequency=0.5).until(shown)
    except TimeoutException:
        raise AssertionError(
            f"{page} did not show {app} active on {cluster!r} within {_WAIT_S:.0f}s "
            f"(last seen {seen[-1] if seen else None!r}); the page says: {_text(driver)}"
        ) from None


def history_figures(driver: WebDriver, run_id: str) -> tuple[str, ...]:
    """RPO, RTO, the procedure's duration and the applications' downtime as the page's
    history row `<tr data-run=RUN_ID>` shows them."""
    row = f'tr[data-run="{run_id}"]'
    columns = ("rpo", "rto", "duration", "downtime")

    def figures(d: WebDriver) -> tuple[str, ...] | None:
        cells = [d.find_elements(By.CSS_SELECTOR, f"{row} td.{c}") for c in columns]
        return tuple(found[0].text.strip() for found in cells) if all(cells) else None

    try:  # the page refreshes itself: a row read while it is swapped is read again
        return WebDriverWait(
            driver, _WAIT_S, ignored_exceptions=(StaleElementReferenceException,)
        ).until(figures)
    except TimeoutException:
        raise AssertionError(f"no history row {run_id!r}; the page says: {_text(driver)}") from None


def requests_made(driver: WebDriver) -> list[str]:
    """The URLs the pages requested since the last call (scripts, styles, fonts,
    images, fetches: the performance log's Network.requestWillBeSent)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def outside(urls: list[str], base: str) -> list[str]:
    """The network requests among `urls` to another host than `base`'s (data:, blob:
    and the browser's own chrome: URLs are no requests)."""
    host = urlsplit(base).netloc
    network = ("http", "https", "ws", "wss")
    return [u for u in urls if urlsplit(u).scheme in network and urlsplit(u).netloc != host]


def wait_for(driver: WebDriver, selector: str, what: str, minimum: int = 1) -> int:
    """Wait until the page shows at least `minimum` elements matching `selector`;
    how many it shows."""

    def shown(d: WebDriver) -> int:
        return len(d.find_elements(By.CSS_SELECTOR, selector))

    try:
        WebDriverWait(driver, _WAIT_S).until(lambda d: shown(d) >= minimum)
    except TimeoutException:
        raise AssertionError(
            f"{driver.current_url} shows {shown(driver)} {what} ({selector}), expected at "
            f"least {minimum}; the page says: {_text(driver)}"
        ) from None
    return shown(driver)


def click(driver: WebDriver, selector: str, what: str) -> None:
    """Click the first element matching `selector`, finding it again when the page's
    scripts replaced it between the find and the click (bootstrap-table redraws its
    rows after they first appear: a stale element failed CI once)."""

    def clicked(d: WebDriver) -> bool:
        d.find_element(By.CSS_SELECTOR, selector).click()
        return True

    try:
        WebDriverWait(driver, _WAIT_S, ignored_exceptions=(StaleElementReferenceException,)).until(
            clicked
        )
    except TimeoutException:
        raise AssertionError(
            f"{driver.current_url}: could not click the {what} ({selector}); "
            f"the page says: {_text(driver)}"
        ) from None


@dataclass(frozen=True)
class Offline:
    """What the offline pages showed, and every request they made."""

    requests: list[str]
    started_by: str


def offline_pages(
    browser: WebDriver, page: str, verification_id: str, failover_id: str, shots: Screenshots
) -> Offline:
    """Open the Data Docs of `verification_id` from the status page's link, its lag
    suite's validation results, and the failover's report for auditors."""
    requests_made(browser)  # the requests before are not these pages'
    browser.get(page)
    link = f'[data-verification="{verification_id}"] a.data-docs'
    wait_for(browser, link, "Data Docs link")
    click(browser, link, "Data Docs link")
    # The index's results table is empty in the HTML: bootstrap-table fills it.
    index_rows = "table.ge-index-page-validation-results-table tbody tr.clickable-row"
    suites = len(table_names())
    assert wait_for(browser, index_rows, "validation results", minimum=suites) == suites
    shots.take(browser, "data-docs-index")
    click(browser, f'{index_rows}[data-href*="/lag/"]', "lag suite's row")
    results = ".bootstrap-table table[data-search] tbody tr[data-index]"
    assert wait_for(browser, results, "expectation results", minimum=3) >= 3
    assert "lag_records" in browser.find_element(By.TAG_NAME, "body").text
    shots.take(browser, "data-docs-validation-lag")
    browser.get(f"{page}runs/{quote(failover_id, safe='')}/report.html")
    wait_for(browser, "tr[data-step]", "steps", minimum=5)
    item = {
        name: browser.find_element(By.CSS_SELECTOR, f'[data-item="{name}"]').text.strip()
        for name in ("started-by", "rpo", "downtime", "verdict")
    }
    assert item["rpo"] == "0 records" and item["downtime"].endswith(" s"), item
    assert item["verdict"] == "failed", item  # the lag suite fails on purpose
    assert verification_id in browser.find_element(By.TAG_NAME, "body").text
    shots.take(browser, "audit-report-failover")
    return Offline(requests_made(browser), item["started-by"])


def _text(driver: WebDriver) -> str:
    try:
        return driver.find_element(By.TAG_NAME, "body").text[:2000]
    except WebDriverException as exc:
        return f"(no text: {exc})"
