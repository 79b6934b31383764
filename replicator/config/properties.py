"""Java `.properties` files, and Kafka's `${provider:...}` indirection for secrets.

MirrorMaker 2 reads its configuration with `java.util.Properties.load`, so an
existing `mm2.properties` can only be read unchanged if every rule of that
format is followed: `#`/`!` comment lines, `=`/`:`/whitespace separators,
backslash line continuation, `\\uXXXX` and the other escapes. Values are
returned exactly as Java would return them (trailing whitespace included);
trimming is the loader's business, as it is Kafka's ConfigDef's.

Secrets are usually kept out of the file with Kafka's ConfigProvider syntax:
`${env:VAR}` (EnvVarConfigProvider), `${file:path:key}` (FileConfigProvider,
which reads `key` from the properties file at `path`) and `${directory:path:key}`
(DirectoryConfigProvider, KIP-632: the whole content of the file `path/key`, one
file per secret, as Kubernetes Secret volumes and Docker secrets under
/run/secrets lay them out; kept exactly, a final newline included, as Kafka keeps
it). All three are resolved here whether or not the file declares
`config.providers`, since a replicator configuration has no other use for that
syntax. One provider is ours:
`${conn:NAME}`, a secret of the Airflow connection the DAGs read the
configuration through (its password, or an entry of its extra's "secrets"),
so that the secrets of a deployment can live where its Airflow keeps them. The
caller passes those values in (`connection`): this package never imports
Airflow, and outside Airflow there are none.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

from replicator.errors import ConfigError

_log = logging.getLogger(__name__)

# Java splits natural lines on \n, \r and \r\n only (not on the other
# characters str.splitlines() knows).
_NATURAL_LINES = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")

# Kafka's ConfigTransformer pattern: ${provider:[path:]key}.
_REFERENCE = re.compile(r"\$\{([^}:]*):([^}]*)\}")


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Parse the `.properties` file at `path` (UTF-8, or ISO-8859-1 as Java writes it)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read configuration file {os.fspath(path)}: {exc.strerror}"
        ) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text, source=os.fspath(path))


def parse_properties(text: str, *, source: str = "<properties>") -> dict[str, str]:
    """Parse `.properties` text exactly as `java.util.Properties.load` does.

    A key given twice keeps its last value, as in Java; a warning names the key
    and the lines, because in an `mm2.properties` it is usually a mistake.
    """
    props: dict[str, str] = {}
    first_seen: dict[str, int] = {}
    lines = _NATURAL_LINES.split(text)
    index = 0
    while index < len(lines):
        lineno = index + 1
        logical = lines[index].lstrip(_WHITESPACE)
        index += 1
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical):
            logical = logical[:-1]
            if index == len(lines):
                break
            logical += lines[index].lstrip(_WHITESPACE)
            index += 1
        key, value = _split_entry(logical, source, lineno)
        if key in first_seen:
            _log.warning(
                "%s: key %r is set on line %d and again on line %d; the last one is used",
                source,
                key,
                first_seen[key],
                lineno,
            )
        first_seen.setdefault(key, lineno)
        props[key] = value
    return props


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes joins the next natural line."""
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_entry(line: str, source: str, lineno: int) -> tuple[str, str]:
    """Split a logical line into key and value at the first unescaped separator."""
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    escaped = False
    for position, char in enumerate(line):
        if not escaped and char in "=:":
            key_end, value_start, has_separator = position, position + 1, True
            break
        if not escaped and char in _WHITESPACE:
            key_end, value_start = position, position + 1
            break
        escaped = char == "\\" and not escaped
    while value_start < len(line):
        char = line[value_start]
        if char not in _WHITESPACE:
            if has_separator or char not in "=:":
                break
            has_separator = True
        value_start += 1
    key = _unescape(line[:key_end], source, lineno, what="key")
    value = _unescape(line[value_start:], source, lineno, what=f"value of {key!r}")
    return key, value


def _unescape(raw: str, source: str, lineno: int, *, what: str) -> str:
    r"""Apply Java's escapes: \t \n \r \f, \uXXXX, and \c meaning c for any other c."""
    if "\\" not in raw:
        return raw
    out: list[str] = []
    position = 0
    while position < len(raw):
        char = raw[position]
        position += 1
        if char != "\\" or position == len(raw):
            if char != "\\":
                out.append(char)
            continue
        escape = raw[position]
        position += 1
        if escape == "u":
            digits = raw[position : position + 4]
            if len(digits) != 4 or not set(digits) <= _HEX:
                # Never quote the text: it may be a secret.
                raise ConfigError(f"{source}:{lineno}: malformed \\uXXXX escape in the {what}")
            out.append(chr(int(digits, 16)))
            position += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(escape, escape))
    # Java strings are UTF-16: join surrogate pairs written as two \u escapes.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def connection_references(props: Mapping[str, str]) -> set[str]:
    """The names the values of `props` take from the connection (`${conn:NAME}`):
    what a process that loads the configuration itself must be handed, and no more."""
    return {
        match.group(2)
        for value in props.values()
        for match in _REFERENCE.finditer(value)
        if match.group(1) == "conn"
    }


def environment_references(props: Mapping[str, str]) -> set[str]:
    """The environment variables the values of `props` read (`${env:VAR}`): what a
    process that loads the configuration itself must be handed."""
    return {
        match.group(2).rpartition(":")[2]
        for value in props.values()
        for match in _REFERENCE.finditer(value)
        if match.group(1) == "env"
    }


def resolve_references(
    props: Mapping[str, str], connection: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Replace every `${env:VAR}`, `${file:path:key}`, `${directory:path:key}` and
    `${conn:NAME}` in the values of `props`; `connection` holds the values of the
    connection's secrets by name.

    A missing variable, file, directory, key or secret is a ConfigError naming the
    configuration key that referred to it, and the reference itself, never a
    resolved value. Relative paths are relative to the working directory, as in
    Kafka's FileConfigProvider and DirectoryConfigProvider. Resolved values are not
    scanned again.
    """
    files: dict[str, dict[str, str]] = {}
    secret_files: dict[Path, str] = {}
    warned: set[tuple[str, Path]] = set()
    given = connection or {}

    def resolve(key: str, match: re.Match[str]) -> str:
        provider, body = match.group(1), match.group(2)
        if provider == "env":
            variable = body.rpartition(":")[2]
            if variable not in os.environ:
                raise ConfigError(
                    f"{key}: environment variable {variable} (from {match.group(0)}) is not set"
                )
            return os.environ[variable]
        if provider == "file":
            path, colon, file_key = body.rpartition(":")
            if not colon or not path:
                raise ConfigError(f"{key}: expected ${{file:path:key}}, got {match.group(0)}")
            if path not in files:
                try:
                    files[path] = read_properties(path)
                except ConfigError as exc:
                    raise ConfigError(f"{key}: {match.group(0)}: {exc}") from exc
            if file_key not in files[path]:
                raise ConfigError(f"{key}: {path} has no key {file_key!r} (from {match.group(0)})")
            return files[path][file_key]
        if provider == "directory":
            secret, content = _directory_entry(key, match.group(0), body, secret_files)
            if content.endswith("\n") and (key, secret) not in warned:
                warned.add((key, secret))
                _log.warning(
                    "%s: %s ends with a newline, which is part of the value (as in Kafka's "
                    "DirectoryConfigProvider) and so of any password it holds; write the "
                    "file without one, e.g. with printf '%%s' (not echo)",
                    key,
                    secret,
                )
            return content
        if provider == "conn":
            if body not in given:
                raise ConfigError(
                    f"{key}: {match.group(0)}: the connection gives no secret {body!r} (it "
                    f"gives: {', '.join(sorted(given)) or 'none'}); under Airflow set the "
                    "password or the extra's \"secrets\" of the replicator's connection, "
                    "elsewhere use ${env:VAR}, ${file:path:key} or ${directory:path:key}"
                )
            return given[body]
        raise ConfigError(
            f"{key}: config provider {provider!r} in {match.group(0)} is not supported "
            "(use ${env:VAR}, ${file:path:key}, ${directory:path:key} or ${conn:NAME})"
        )

    return {
        key: _REFERENCE.sub(lambda match, key=key: resolve(key, match), value)  # type: ignore[misc]
        for key, value in props.items()
    }


def _directory_entry(
    key: str, reference: str, body: str, cache: dict[Path, str]
) -> tuple[Path, str]:
    """The file `${directory:path:name}` names and its whole content (UTF-8), as Kafka's
    DirectoryConfigProvider reads it: `name` is a regular file directly in `path`.
    Errors name the configuration key, the reference and the path, never content."""
    path, colon, name = body.rpartition(":")
    if not colon or not path or not name:
        raise ConfigError(f"{key}: expected ${{directory:path:key}}, got {reference}")
    if name in {".", ".."} or "/" in name or os.sep in name:
        raise ConfigError(
            f"{key}: {reference}: {name!r} must be the name of a file directly in {path} "
            "(Kafka's DirectoryConfigProvider reads no subdirectories); put the file there "
            "or name its own directory as the path"
        )
    directory = Path(path)
    secret = directory / name
    if secret in cache:
        return secret, cache[secret]
    if not directory.is_dir():
        raise ConfigError(
            f"{key}: {reference}: directory {directory} does not exist (or is not a "
            "directory); mount the secret there (a Kubernetes Secret volume, Docker "
            "secrets under /run/secrets) or correct the path"
        )
    if not secret.is_file():
        present = sorted(
            entry.name
            for entry in directory.iterdir()
            if entry.is_file() and not entry.name.startswith(".")
        )
        raise ConfigError(
            f"{key}: {reference}: {secret} does not exist or is not a regular file "
            f"({directory} holds: {', '.join(present) or 'no files'}); write the secret "
            f"to a file named {name} in {directory}, or correct the key"
        )
    try:
        data = secret.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{key}: {reference}: cannot read {secret}: {exc.strerror}") from exc
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{key}: {reference}: {secret} is not UTF-8 text (Kafka reads it as UTF-8)"
        ) from exc
    cache[secret] = content
    return secret, content
