"""README.md is short and every relative link of it resolves. (The site's strict build and
what a reader sees of it: tests/integration/docs/test_docs_site.py.)"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README_LIMIT = 250


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
