"""What a command prints: `-o table` (the default: lines for a person), `-o json`
(for scripts; `--json` is the same) or `-o yaml`. JSON and YAML hold the same data,
with times as ISO 8601 strings; progress bars never mix into them."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from datetime import date, datetime
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any

import yaml

from replicator.cli.app import usage_error


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


def chosen(output: Output, json_flag: bool = False) -> Output:
    """The format `-o` and `--json` ask for together."""
    if json_flag and output not in (Output.table, Output.json):
        raise usage_error(f"--json and -o {output.value} ask for two formats; give one", "--json")
    return Output.json if json_flag else output


def plain(value: Any) -> Any:  # noqa: PLR0911 - one return per kind of value
    """`value` as JSON's types: dataclasses as dicts, times as ISO 8601, paths as text."""
    if is_dataclass(value) and not isinstance(value, type):
        return plain(asdict(value))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, Enum):
        return value.value
    return value


def emit(data: Any, output: Output, table: Callable[[], None]) -> None:
    """Print `data` as JSON or YAML, or call `table` to print it for a person."""
    if output is Output.json:
        json.dump(plain(data), sys.stdout, indent=2)
        print()
    elif output is Output.yaml:
        yaml.safe_dump(plain(data), sys.stdout, sort_keys=False, allow_unicode=True)
    else:
        table()
