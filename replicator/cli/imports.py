"""`replicator import strimzi RESOURCE.yaml`: another tool's configuration as an mm2.properties.

`strimzi` converts a Strimzi `KafkaMirrorMaker2` custom resource (see
`replicator.config.strimzi`): the properties go to stdout, or to `--output` (never over
an existing file without `--force`); what was not mapped, and where each Secret must be
mounted, go to stderr. A resource that cannot be converted exits with status 2 and one
line on stderr naming the field and what to do, as a usage error does: the input must
change, and nothing was written.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from replicator.config.strimzi import DEFAULT_SECRETS_DIR, convert_text
from replicator.errors import ConfigError, ReplicatorError

#: The exit status of a resource that cannot be converted (as argparse's usage errors).
CANNOT_CONVERT = 2


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "import", help="convert another tool's configuration to an mm2.properties"
    )
    sources = parser.add_subparsers(dest="import_from", required=True, metavar="FROM")
    strimzi = sources.add_parser(
        "strimzi",
        help="a Strimzi KafkaMirrorMaker2 custom resource (YAML)",
        description="Convert a Strimzi KafkaMirrorMaker2 resource (kafka.strimzi.io/v1beta2 "
        "or v1) to an mm2.properties that `replicator run` reads. See docs/strimzi.md.",
    )
    strimzi.add_argument(
        "resource", help="the YAML file (several documents or a kubectl List are fine; - is stdin)"
    )
    strimzi.add_argument(
        "-o", "--output", type=Path, help="write the properties here (default: stdout)"
    )
    strimzi.add_argument(
        "--force", action="store_true", help="replace the --output file if it exists"
    )
    strimzi.add_argument(
        "--secrets-dir",
        default=DEFAULT_SECRETS_DIR,
        help="where the replicator finds the resource's Secrets, one directory per Secret "
        f"(default {DEFAULT_SECRETS_DIR})",
    )
    strimzi.add_argument(
        "--name", help="the KafkaMirrorMaker2 to convert when the file holds several"
    )
    strimzi.set_defaults(handler=_strimzi)


def _strimzi(args: argparse.Namespace) -> int:
    try:
        if args.output is not None and args.output.exists() and not args.force:
            raise ConfigError(
                f"{args.output} exists; add --force to replace it, or choose another --output"
            )
        source = "<stdin>" if args.resource == "-" else args.resource
        text = sys.stdin.read() if args.resource == "-" else _read(Path(args.resource))
        conversion = convert_text(text, name=args.name, secrets_dir=args.secrets_dir, source=source)
    except ConfigError as exc:
        print(f"replicator: error: {exc}", file=sys.stderr)
        return CANNOT_CONVERT
    if args.output is None:
        sys.stdout.write(conversion.properties)
    else:
        _write(args.output, conversion.properties)
    for note in conversion.notes:
        print(f"note: {note}", file=sys.stderr)
    root = args.secrets_dir.rstrip("/") or "/"
    for secret, keys in conversion.secrets.items():
        print(
            f"mount Secret {secret} at {root}/{secret} (reads {', '.join(keys)})", file=sys.stderr
        )
    if args.output is not None:
        print(f"{conversion.name}: written to {args.output}", file=sys.stderr)
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
