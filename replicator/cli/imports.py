"""`replicator import strimzi RESOURCE.yaml`: another tool's configuration as an mm2.properties.

`strimzi` converts a Strimzi `KafkaMirrorMaker2` custom resource (see
`replicator.config.strimzi`): the properties go to stdout, or to `--output` (never over
an existing file without `--force`); what was not mapped, and where each Secret must be
mounted, go to stderr. A resource that cannot be converted exits with status 2 and one
line on stderr naming the field and what to do, as a usage error does: the input must
change, and nothing was written.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from replicator.cli.app import command, exit_statuses, group
from replicator.cli.options import flag
from replicator.config.strimzi import DEFAULT_SECRETS_DIR, convert_text
from replicator.errors import ConfigError, ReplicatorError

#: The exit status of a resource that cannot be converted (as a usage error).
CANNOT_CONVERT = 2

IMPORTS = group("import", "convert another tool's configuration to an mm2.properties", "Set-up")


@command(
    IMPORTS,
    "strimzi",
    help_="a Strimzi KafkaMirrorMaker2 custom resource (YAML)",
    description="Convert a Strimzi KafkaMirrorMaker2 resource (kafka.strimzi.io/v1beta2 "
    "or v1) to an mm2.properties that `replicator run` reads. See docs/strimzi.md. "
    "Here -o is --output, the file to write: the properties are the only output.",
    epilog=exit_statuses(
        "the file cannot be written",
        zero="converted",
    ).replace(
        "2 a usage error",
        "2 the resource cannot be converted (the field is named) or a usage error",
    ),
)
def _strimzi(
    *,
    resource: Annotated[
        str,
        typer.Argument(
            metavar="RESOURCE",
            help="the YAML file (several documents or a kubectl List are fine; - is stdin)",
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", metavar="PATH", help="write the properties here (default: stdout)"
        ),
    ] = None,
    force: Annotated[bool, flag("--force", "replace the --output file if it exists")] = False,
    secrets_dir: Annotated[
        str,
        typer.Option(
            "--secrets-dir",
            metavar="PATH",
            help="where the replicator finds the resource's Secrets, one directory per Secret",
        ),
    ] = DEFAULT_SECRETS_DIR,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            metavar="NAME",
            help="the KafkaMirrorMaker2 to convert when the file holds several",
        ),
    ] = None,
) -> int:
    try:
        if output is not None and output.exists() and not force:
            raise ConfigError(
                f"{output} exists; add --force to replace it, or choose another --output"
            )
        source = "<stdin>" if resource == "-" else resource
        text = sys.stdin.read() if resource == "-" else _read(Path(resource))
        conversion = convert_text(text, name=name, secrets_dir=secrets_dir, source=source)
    except ConfigError as exc:
        print(f"replicator: error: {exc}", file=sys.stderr)
        return CANNOT_CONVERT
    if output is None:
        sys.stdout.write(conversion.properties)
    else:
        _write(output, conversion.properties)
    for note in conversion.notes:
        print(f"note: {note}", file=sys.stderr)
    root = secrets_dir.rstrip("/") or "/"
    for secret, keys in conversion.secrets.items():
        print(
            f"mount Secret {secret} at {root}/{secret} (reads {', '.join(keys)})", file=sys.stderr
        )
    if output is not None:
        print(f"{conversion.name}: written to {output}", file=sys.stderr)
    return 0


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (YAML is UTF-8)") from exc


def _write(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all (a temporary file renamed into place)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise ReplicatorError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        Path(temporary).chmod(0o644)
        Path(temporary).replace(path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise ReplicatorError(f"cannot write {path}: {exc.strerror}") from exc
