"""The documentation site builds in MkDocs' strict mode (every page in the navigation,
every link and anchor resolving), and every relative link of README.md resolves."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README_LIMIT = 250


def test_mkdocs_builds_strict(tmp_path):
    # Not -q: mkdocs --quiet drops the warnings, and strict mode then passes.
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, (
        "mkdocs build --strict failed (a page missing from the nav in mkdocs.yml, or a "
        "broken link or anchor in docs/):\n" + result.stdout + result.stderr
    )
    assert (tmp_path / "site" / "index.html").is_file()


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_LIMIT, (
        f"README.md has {lines} lines, more than {README_LIMIT}: move the detail into a page "
        "under docs/ and link it from the README's map"
    )


def test_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        resolved = ROOT / path
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md":
            slugs = {
                re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
                for heading in re.findall(r"^#+ (.+)$", resolved.read_text(), re.M)
            }
            if anchor not in slugs:
                broken.append(target)
    assert not broken, f"README.md links to what does not exist: {', '.join(broken)}"
