"""The typer application every command module adds its commands to, and what the
commands share: the options that mean the same everywhere, the exit statuses,
logging, and the one place where errors become a line on stderr.

Every command is added with `command(...)`, which wraps its function so that:
- `-v` and `--log-format` work after the command as before it;
- logging is configured once the whole command line is parsed;
- the function's return value is the process's exit status (`exit_status` reads it
  for `replicator.cli.main`), and an error the user can act on (a `ReplicatorError`,
  a Kafka client error) is one line on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from confluent_kafka import KafkaException

from replicator import __version__, logs
from replicator.cli.kafka_errors import kafka_error_line
from replicator.errors import ReplicatorError

#: Errors whose message is already a complete, actionable line for the user (the
#: local stack's `StackError` is one).
_USER_ERRORS = (ReplicatorError,)
CONFIG_ENV = "REPLICATOR_CONFIG"
#: The panel of the options every command takes (rich help).
GLOBAL_PANEL = "Global options"


def exit_statuses(one: str, zero: str = "done") -> str:
    """The help epilog that documents a command's exit statuses."""
    return (
        f"Exit status: 0 {zero}; 1 {one}; "
        "2 a usage error (unknown option, missing or invalid value)."
    )


#: The epilog of most commands: they either did their work or failed.
EXIT_FAILED = exit_statuses("an error (a cluster or the state store did not answer, ...)")

ROOT = typer.Typer(
    name="replicator",
    help="Kafka disaster recovery: replication, offsets, failover and drills.",
    epilog="Run `replicator COMMAND --help` for a command's options and exit statuses; "
    "docs/cli.md has them all.",
    no_args_is_help=True,
    # A traceback with local variables could show a password: plain tracebacks only.
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class _Invocation:
    """What the root options and the command that ran leave for `main`."""

    def __init__(self, own_process: bool = False) -> None:
        self.own_process = own_process  # argv is this process's command line
        self.verbose = False
        self.log_format: str | None = None
        self.exit_status: int | None = None


_invocation = _Invocation()


def start(own_process: bool = False) -> None:
    """Forget the previous invocation (`main` may be called several times in a process);
    `own_process`: the arguments are this process's command line (not a call from a
    test or another program), so a command may re-execute the process."""
    global _invocation  # noqa: PLW0603 - one invocation at a time, as argv is
    _invocation = _Invocation(own_process)


def own_process() -> bool:
    """Whether this invocation's arguments are the process's own command line."""
    return _invocation.own_process


def exit_status() -> int | None:
    """The exit status the command returned; None if no command ran (help, version,
    completion, a usage error)."""
    return _invocation.exit_status


def _version() -> str:
    """`replicator 0.1.0 (confluent-kafka 2.16.1, librdkafka 2.x.y)`: what a bug report needs."""
    import confluent_kafka  # noqa: PLC0415 - already loaded by the commands' imports

    librdkafka, _ = confluent_kafka.libversion()
    return (
        f"replicator {__version__} "
        f"(confluent-kafka {confluent_kafka.__version__}, librdkafka {librdkafka})"
    )


def _print_version(value: bool) -> None:
    if value:
        print(_version())
        raise typer.Exit(0)


_LOG_FORMAT_HELP = f"text (default) or json: one JSON object a line (also ${logs.ENV})"
VerboseOption = Annotated[
    bool,
    typer.Option(
        "-v", "--verbose", metavar="", help="log at DEBUG level", rich_help_panel=GLOBAL_PANEL
    ),
]
LogFormatOption = Annotated[
    str | None,
    typer.Option(
        "--log-format",
        metavar="text|json",
        help=_LOG_FORMAT_HELP,
        rich_help_panel=GLOBAL_PANEL,
        show_default=False,
    ),
]


@ROOT.callback()
def _root(
    verbose: VerboseOption = False,
    log_format: LogFormatOption = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            metavar="",
            callback=_print_version,
            is_eager=True,
            help="the replicator's version and the Kafka client libraries it runs on",
        ),
    ] = False,
) -> None:
    _invocation.verbose = verbose
    _invocation.log_format = log_format


#: The panels `replicator --help` lists the commands in, in this order.
PANELS = ("Set-up", "Replication", "DR procedures", "Client applications", "Local stack")


def group(name: str, help_: str, panel: str) -> typer.Typer:
    """A group of sub-commands (`replicator stack ...`), listed in `panel`."""
    sub = typer.Typer(
        name=name,
        help=help_,
        no_args_is_help=True,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    ROOT.add_typer(sub, name=name, rich_help_panel=panel)
    return sub


def command(
    parent: typer.Typer,
    name: str,
    *,
    help_: str,
    epilog: str = EXIT_FAILED,
    description: str | None = None,
    context_settings: dict[str, Any] | None = None,
    panel: str | None = None,
) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Add the decorated function as command `name` of `parent`: its parameters are
    the command's options; it returns the exit status. `help_` is the one line the
    command list shows; `description`, if given, follows it in the command's help."""

    def decorate(function: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            verbose = kwargs.pop("global_verbose") or _invocation.verbose
            _configure_logging(verbose, kwargs.pop("global_log_format") or _invocation.log_format)
            _invocation.exit_status = _run(function, verbose, args, kwargs)

        # The command modules use `from __future__ import annotations`: typer reads the
        # annotations of `wrapper`, whose module cannot resolve their names, so they
        # are resolved here, in the function's own module.
        signature = inspect.signature(function, eval_str=True)
        extra = [
            inspect.Parameter(
                "global_verbose", inspect.Parameter.KEYWORD_ONLY, default=False,
                annotation=VerboseOption,
            ),
            inspect.Parameter(
                "global_log_format", inspect.Parameter.KEYWORD_ONLY, default=None,
                annotation=LogFormatOption,
            ),
        ]  # fmt: skip
        parameters = [*signature.parameters.values(), *extra]
        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        full_help = help_ if description is None else f"{help_}\n\n{description}"
        parent.command(
            name,
            help=full_help,
            short_help=help_,
            epilog=epilog,
            context_settings=context_settings,
            rich_help_panel=panel,
        )(wrapper)
        return function

    return decorate


def _configure_logging(verbose: bool, log_format: str | None) -> None:
    try:
        chosen = logs.configure(logging.DEBUG if verbose else logging.INFO, log_format)
    except ValueError as exc:  # --log-format or $REPLICATOR_LOG_FORMAT names no format
        raise typer.BadParameter(str(exc), param_hint="'--log-format'") from None
    logs.pass_to_workers(chosen)
    # One INFO line per HTTP request (Airflow's REST API, polled) would drown the rest.
    logging.getLogger("httpx").setLevel(logging.DEBUG if verbose else logging.WARNING)


def _run(function: Callable[..., int], verbose: bool, args: Any, kwargs: dict[str, Any]) -> int:
    try:
        return int(function(*args, **kwargs) or 0)
    except _USER_ERRORS as exc:
        print(f"replicator: error: {exc}", file=sys.stderr)
        return 1
    except KafkaException as exc:
        # A cluster that is away or refuses us: the user's to fix, not a crash.
        if verbose:
            traceback.print_exc()
        config = kwargs.get("config")
        line = kafka_error_line(exc, config if isinstance(config, Path) else None)
        print(f"replicator: error: {line}", file=sys.stderr)
        return 1


def usage_error(message: str, option: str) -> typer.BadParameter:
    """An invalid combination of options: exit status 2, as any usage error."""
    return typer.BadParameter(message, param_hint=f"'{option}'")
