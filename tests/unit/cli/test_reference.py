"""docs/cli.md is the commands' own `--help` (issue 30): it fails when they differ."""

from __future__ import annotations

from pathlib import Path

from replicator.cli.reference import command_paths, help_text, reference

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "cli.md"


def test_docs_cli_md_is_what_the_commands_help_says() -> None:
    assert PAGE.read_text(encoding="utf-8") == reference(), (
        "docs/cli.md differs from the commands' --help: run "
        "`.venv/bin/python -m replicator.cli.reference --write docs/cli.md`"
    )


def test_every_command_documents_its_exit_statuses() -> None:
    groups = {"", "acls", "import", "flows", "offsets", "clients", "stack"}
    commands = [path for path in command_paths() if " ".join(path) not in groups]
    assert len(commands) == 33  # the 29 of the argparse CLI; flows list, describe, pause, resume
    for path in commands:
        text = " ".join(help_text(path).split())
        assert "Exit status: 0" in text, path
        assert "2 a usage error" in text or "or a usage error" in text, path


def test_the_page_is_in_the_navigation() -> None:
    assert "cli.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


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
