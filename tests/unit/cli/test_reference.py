"""docs/cli.md and its group pages are the commands' own `--help` (issue 30): it fails
when they differ."""

from __future__ import annotations

from pathlib import Path

from replicator.cli.app import PANELS
from replicator.cli.reference import command_paths, help_text, page_of, pages

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"


def test_docs_cli_md_is_what_the_commands_help_says() -> None:
    for name, text in pages().items():
        page = DOCS / name
        assert page.exists() and page.read_text(encoding="utf-8") == text, (
            f"docs/{name} differs from the commands' --help: run "
            "`.venv/bin/python -m replicator.cli.reference --write docs/cli.md`"
        )


def test_one_page_per_help_panel_and_every_command_on_one() -> None:
    written = pages()
    assert set(written) == {"cli.md", *(page_of(panel) for panel in PANELS)}
    titles = [" ".join(["replicator", *path]) for path in command_paths()]
    sections = [
        line.removeprefix("## `").removesuffix("`")
        for text in written.values()
        for line in text.splitlines()
        if line.startswith("## `")
    ]
    assert sorted(sections) == sorted(titles)
    index = written["cli.md"]
    for path in command_paths():
        if path:
            assert f"#{'-'.join(['replicator', *path])})" in index, path


def test_every_command_documents_its_exit_statuses() -> None:
    groups = {"", "acls", "import", "flows", "offsets", "clients", "stack"}
    commands = [path for path in command_paths() if " ".join(path) not in groups]
    # The 29 of the argparse CLI; flows list, describe, pause, resume; verification-server.
    assert len(commands) == 34
    for path in commands:
        text = " ".join(help_text(path).split())
        assert "Exit status: 0" in text, path
        assert "2 a usage error" in text or "or a usage error" in text, path


def test_the_pages_are_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for name in pages():
        assert f" {name}\n" in nav, name


#: The commands that only act (start, stop or serve something) and read nothing back:
#: every other command takes -o table|json|yaml.
_ACTIONS = {
    "run",
    "stack up",
    "stack down",
    "stack run",
    "stack serve",
    "stack prepare",
    "stack traffic",
    "verification-server",
}


def test_every_command_that_reads_takes_o_table_json_yaml() -> None:
    groups = {"", "acls", "import", "flows", "offsets", "clients", "stack"}
    for path in command_paths():
        name = " ".join(path)
        if name in groups or name in _ACTIONS:
            continue
        text = " ".join(help_text(path).split())
        assert "--output -o" in text or "-o, --output" in text, f"replicator {name} has no -o"
        if name != "import strimzi":  # its -o is --output FILE (the properties written)
            assert "table|json|yaml" in text, f"replicator {name}: -o without its formats"
