"""The documentation site as a reader gets it (issue 30): `mkdocs build --strict` (the
build `make docs` serves), served over HTTP and opened in headless Chromium.

- Every page of the navigation opens (no request of the site answered 404) and shows
  its title; the site makes no request outside its own host, so it reads the same on
  an estate without internet access.
- The command-line reference (docs/cli.md and its group pages), as the browser renders
  it, is what `replicator ... --help` prints: for every command, the rendered block
  equals the command's help at the page's width, and the installed `replicator`
  executable prints the same text.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from replicator.cli.reference import WIDTH, command_paths, help_text, pages

from helpers.browser import chromium, outside, requests_made

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[3]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _Site:
    """The built site on a local HTTP server; every request's path and status."""

    def __init__(self, directory: Path) -> None:
        self.answers: list[tuple[str, int]] = []
        site = self

        class Handler(SimpleHTTPRequestHandler):
            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                site.answers.append((self.path, int(code)))

        self._server = ThreadingHTTPServer(
            ("127.0.0.1", 0), partial(Handler, directory=str(directory))
        )
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> _Site:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def missing(self) -> list[str]:
        return [path for path, code in self.answers if code == 404]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Site]:
    built = tmp_path_factory.mktemp("docs") / "site"
    # Not -q: mkdocs --quiet drops the warnings, and strict mode then passes.
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(built)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, (
        "mkdocs build --strict failed (a page missing from the nav in mkdocs.yml, or a "
        "broken link or anchor in docs/):\n" + result.stdout + result.stderr
    )
    with _Site(built) as served:
        yield served


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


def test_every_page_of_the_navigation_opens(site: _Site, browser: WebDriver) -> None:
    browser.get(f"{site.url}/")
    links = {
        a.get_attribute("href")
        for a in browser.find_elements(By.CSS_SELECTOR, "nav.md-nav--primary a.md-nav__link")
    }
    pages = sorted(link.split("#")[0] for link in links if link and link.startswith(site.url))
    # Every page of mkdocs.yml's nav (a section's label is not a link).
    nav = re.findall(r":\s*([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert len(set(pages)) == len(nav), (pages, nav)
    for page in pages:
        browser.get(page)
        [title] = browser.find_elements(By.CSS_SELECTOR, "article h1")
        assert title.text.strip(), f"{page} has an empty title"
    assert site.missing() == [], f"the site asked for what it does not have: {site.missing()}"
    assert outside(requests_made(browser), site.url) == [], (
        "the site loads from outside its host (fonts, scripts): set them local in mkdocs.yml"
    )


def test_the_cli_reference_shows_what_the_commands_help_says(
    site: _Site, browser: WebDriver
) -> None:
    rendered: dict[str, str] = {}
    for name in pages():  # the index, then one page per group of `replicator --help`
        browser.get(f"{site.url}/{name.removesuffix('.md')}/")
        blocks = browser.execute_script(_HELP_BLOCKS)
        assert not set(blocks) & set(rendered), f"{name}: a command on two pages"
        rendered.update(blocks)
    paths = list(command_paths())
    titles = [" ".join(["replicator", *path]) for path in paths]
    assert sorted(rendered) == sorted(titles), "the pages' sections are not the commands"
    for path, title in zip(paths, titles, strict=True):
        assert _lines(rendered[title]) == _lines(help_text(path)), f"{title} --help differs"
    # The executable on PATH, as an operator types it, prints what the page shows.
    executable = Path(sys.executable).with_name("replicator")
    env = dict(os.environ, COLUMNS=str(WIDTH), NO_COLOR="1", TERM="dumb")
    for path in (["--help"], ["flows", "pause", "--help"], ["verify", "--help"]):
        printed = subprocess.run(
            [str(executable), *path], capture_output=True, text=True, env=env, check=True
        ).stdout
        title = " ".join(["replicator", *path[:-1]])
        assert _lines(_ANSI.sub("", printed)) == _lines(rendered[title]), title


#: A page's command sections as the browser shows them: each h2's title, and the text of
#: the first code block after it (before the next h2).
_HELP_BLOCKS = """
const blocks = {};
for (const h2 of document.querySelectorAll('article h2')) {
  let next = h2.nextElementSibling;
  while (next && next.tagName !== 'H2' && !next.querySelector('pre')
         && next.tagName !== 'PRE') {
    next = next.nextElementSibling;
  }
  if (!next || next.tagName === 'H2') continue;
  const code = next && (next.querySelector('pre code') || next.querySelector('pre'));
  if (code) blocks[h2.textContent.replace(/¶$/, '').trim()] = code.textContent;
}
return blocks;
"""


def _lines(text: str) -> list[str]:
    """The text's lines without trailing spaces, and without blank lines around it."""
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n").splitlines()
