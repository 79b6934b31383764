"""A local PostgreSQL server for the DR state store, from the system's own binaries.

The state store's tests run against it (tests/helpers/postgres.py), and so can a
deployment that starts its database beside the replicator instead of using a
managed one. It runs the server binaries of Debian's `postgresql` package
(`make setup` installs it; `/usr/lib/postgresql/<major>/bin`, or `pg_ctl` on PATH
elsewhere), creates a cluster with `initdb` in a folder of its own and serves TCP
on one address only: no Unix socket, so nothing under /var/run is needed, and no
system service is enabled or touched.

PostgreSQL refuses to run as root; as root the server runs as the package's
`postgres` user, which then owns the folder (and may pass through its parents).

Starting is robust on a loaded machine and says why when it fails:

- the port is checked right before the server binds it (after `initdb`, which
  takes a minute under load), and a server that could not bind it raises
  `PortTakenError`, so a caller can try another port;
- a server still starting when the timeout ends is stopped, never left behind;
- a `postmaster.pid` whose process is not this folder's server (left by a server
  that was killed, its number since reused) is not taken for a running server;
- every failure carries the end of the server's log (or of initdb's output).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError

from replicator_lab.broker import port_in_use
from replicator_lab.errors import StackError
from replicator_lab.private import write_private

#: Where Debian's packages put the server binaries, one folder per major version.
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
#: The system user a server started by root runs as (created by Debian's package).
SERVER_USER = "postgres"
_LOG_TAIL_LINES = 40
_STOP_TIMEOUT_S = 60
#: What the server logs when another process holds its port.
_PORT_TAKEN = "Address already in use"


class PortTakenError(StackError):
    """The server could not listen on its port: another process holds it (taken
    between the choice of the port and the server's bind). Another port may work."""


def find_bin_dir() -> Path:
    """The folder with `initdb` and `pg_ctl`: the one on PATH, else Debian's newest."""
    on_path = shutil.which("pg_ctl")
    if on_path and (Path(on_path).parent / "initdb").exists():
        return Path(on_path).parent
    found = [p for p in Path("/").glob(DEBIAN_BIN_GLOB.lstrip("/")) if (p / "initdb").exists()]
    if not found:
        raise StackError(
            f"no PostgreSQL server binaries (initdb, pg_ctl) on PATH or under {DEBIAN_BIN_GLOB}; "
            "install Debian's `postgresql` package (`make setup` does)"
        )
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)


@dataclass(frozen=True)
class LocalPostgres:
    """One PostgreSQL cluster under `root` (data in `root/data`, log in `root/server.log`),
    serving `host:port`; `user` is its superuser, with `password` if given (clients
    then authenticate with SCRAM), else trusted on that address.

    `durable=False` turns off fsync and full-page writes: a throw-away server for
    tests, many times faster on a busy disk, that loses its data if the machine
    crashes.
    """

    root: Path
    port: int
    host: str = "127.0.0.1"
    user: str = "replicator"
    password: str | None = field(default=None, repr=False)
    durable: bool = True

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = "postgres", driver: str = "psycopg") -> str:
        """The SQLAlchemy URL of `database` on this server (password included)."""
        return URL.create(
            f"postgresql+{driver}",
            username=self.user,
            password=self.password,
            host=self.host,
            port=self.port,
            database=database,
        ).render_as_string(hide_password=False)

    # -- lifecycle ---------------------------------------------------------------

    def running(self) -> bool:
        """True when the server of this folder runs: the process `postmaster.pid`
        names is alive and works in this data folder. (`pg_ctl status` trusts any live
        process of that number the server's user may signal: after a server was
        killed, that can be another one's process, which `pg_ctl stop` would then
        interrupt.)"""
        return self.server_pid() is not None

    def server_pid(self) -> int | None:
        """The pid of this folder's running server, else None."""
        pid = self._pid_file_pid()
        if pid is None:
            return None
        try:
            cwd = Path(f"/proc/{pid}/cwd").readlink()
        except OSError:  # no such process (or not ours to inspect)
            return None
        return pid if cwd.resolve() == self.data_dir.resolve() else None

    def up(self, timeout: float = 60.0) -> None:
        """Create the cluster on first use, then start the server and wait until it
        accepts connections; a server already running from this folder is kept.

        `timeout` bounds `initdb` and the start each. Raises `PortTakenError` when
        another process holds the port (also if it took it during `initdb`), and
        StackError with the end of the server's log on any other failure; a server
        that did not come up in time is stopped before raising."""
        if self.running():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self._own(self.root)
        self._let_server_user_in()
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb(timeout)
        self._remove_stale_pid_file()
        # Checked here, not before initdb: that takes a minute on a loaded machine,
        # long enough for another process to take a port that was free.
        if port_in_use(self.port):
            raise PortTakenError(
                f"port {self.port} for PostgreSQL under {self.root} is already in use by "
                "another process; free it or choose another port"
            )
        options = [
            f"-p {self.port}",
            f"-c listen_addresses={self.host}",
            "-c unix_socket_directories=''",
        ]
        if not self.durable:
            options += ["-c fsync=off", "-c full_page_writes=off", "-c synchronous_commit=off"]
        log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
        started = self._run(
            "pg_ctl",
            "start",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
            "-w",
            "-t",
            str(max(1, int(timeout))),
            "-o",
            " ".join(options),
            check=False,
            timeout=timeout + _STOP_TIMEOUT_S,
        )
        if started.returncode == 0:
            return
        this_start = self._log_since(log_start)
        where = f"PostgreSQL under {self.root} on {self.host}:{self.port}"
        if self.server_pid() is not None:
            # pg_ctl gave up waiting; the server may still come up later: stop it, so
            # no server is left behind on a port the caller believes free.
            self._stop_now()
            raise StackError(
                f"{where} did not accept connections within {timeout:.0f}s (still "
                f"starting; stopped): {started.stdout.strip()}\n{self.log_tail()}"
            )
        if _PORT_TAKEN in this_start:
            raise PortTakenError(
                f"{where} could not listen: another process took port {self.port} "
                f"before the server bound it: {started.stdout.strip()}\n{self.log_tail()}"
            )
        raise StackError(f"{where} did not start: {started.stdout.strip()}\n{self.log_tail()}")

    def down(self, wipe: bool = False) -> None:
        """Stop the server (fast shutdown: sessions are ended), and delete its
        folder if `wipe`."""
        if self.running():
            stopped = self._run(
                "pg_ctl",
                "stop",
                "-D",
                str(self.data_dir),
                "-m",
                "fast",
                "-w",
                "-t",
                str(_STOP_TIMEOUT_S),
                check=False,
            )
            if stopped.returncode != 0:
                raise StackError(
                    f"PostgreSQL under {self.root} did not stop within {_STOP_TIMEOUT_S}s: "
                    f"{stopped.stdout.strip()}; stop it with "
                    f"`pg_ctl stop -D {self.data_dir} -m immediate`"
                )
        if wipe:
            shutil.rmtree(self.root, ignore_errors=True)
            if self.root.exists():
                raise StackError(f"could not delete {self.root}; delete it by hand")

    # -- databases -----------------------------------------------------------------

    def create_database(self, name: str) -> str:
        """Create database `name` unless it exists; returns its SQLAlchemy URL."""
        with self._admin() as conn:
            exists = conn.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            ).first()
            if exists is None:
                conn.execute(text(f"CREATE DATABASE {_quoted(name)}"))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop database `name` if it exists, ending its sessions first."""
        with self._admin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)"))

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The end of the server's log, for error messages."""
        if not self.log_file.exists():
            return f"(no server log at {self.log_file})"
        tail = self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        return f"--- {self.log_file} (last {len(tail)} lines)\n" + "\n".join(tail)

    # -- plumbing -------------------------------------------------------------------

    def _initdb(self, timeout: float) -> None:
        # The half of a cluster whose initdb was killed (a session interrupted) is redone.
        shutil.rmtree(self.data_dir, ignore_errors=True)
        args = ["-D", str(self.data_dir), "-U", self.user, "-E", "UTF8", "--no-instructions"]
        if not self.durable:
            args.append("--no-sync")  # a throw-away cluster: no fsync of its 1,000 files
        password_file = self.root / ".initdb-password"
        if self.password is None:
            args += ["--auth=trust"]
        else:
            write_private(password_file, self.password)  # 0600 from creation
            self._own(password_file)
            args += ["--auth=scram-sha-256", f"--pwfile={password_file}"]
        try:
            done = self._run("initdb", *args, check=False, timeout=timeout)
        except StackError:
            shutil.rmtree(self.data_dir, ignore_errors=True)  # initdb's half, so a retry can run
            raise
        finally:
            password_file.unlink(missing_ok=True)
        if done.returncode != 0:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise StackError(
                f"initdb of a PostgreSQL cluster in {self.data_dir} failed: {done.stdout.strip()}"
            )

    def _pid_file_pid(self) -> int | None:
        """The process number in `postmaster.pid` if that process is alive."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        return pid if Path(f"/proc/{pid}").exists() else None

    def _remove_stale_pid_file(self) -> None:
        """A `postmaster.pid` left by a server that was killed: the server would refuse
        to start if its number now belongs to a live process of the server's user."""
        pid_file = self.data_dir / "postmaster.pid"
        if pid_file.exists() and not self.running():
            pid_file.unlink(missing_ok=True)

    def _stop_now(self) -> None:
        """Stop this folder's server at once (immediate shutdown), whatever it is doing."""
        pid = self._pid_file_pid()
        self._run(
            "pg_ctl",
            "stop",
            "-D",
            str(self.data_dir),
            "-m",
            "immediate",
            "-w",
            "-t",
            str(_STOP_TIMEOUT_S),
            check=False,
            timeout=_STOP_TIMEOUT_S * 2,
        )
        if pid is not None and self.server_pid() == pid:
            os.kill(pid, signal.SIGKILL)  # not even an immediate shutdown took

    def _log_since(self, offset: int) -> str:
        """What the server logged after `offset` bytes of its log."""
        try:
            with self.log_file.open("rb") as log:
                log.seek(offset)
                return log.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def _let_server_user_in(self) -> None:
        """As root, let the server's user pass through the folders above `root` that
        the stack made 0700 (`.data` under umask 077): execute permission only, nobody
        may list them."""
        if os.geteuid() != 0:
            return
        user = self._server_user()
        for folder in self.root.resolve().parents:
            info = folder.stat()
            if info.st_uid == user.pw_uid:
                needed = stat.S_IXUSR
            elif info.st_gid == user.pw_gid:
                needed = stat.S_IXGRP
            else:
                needed = stat.S_IXOTH
            if not info.st_mode & needed:
                # Only folders below the working directory (.data, made 0700), never
                # others such as /root: those are the machine's owner's to open.
                if info.st_uid != 0 or not folder.is_relative_to(Path.cwd()):
                    raise StackError(
                        f"PostgreSQL runs as {SERVER_USER!r}, which may not enter {folder}; "
                        f"put its folder {self.root} elsewhere"
                    )
                folder.chmod(stat.S_IMODE(info.st_mode) | needed)

    @contextmanager
    def _admin(self) -> Iterator[Connection]:
        """A connection to the `postgres` database, outside transactions (CREATE
        DATABASE). A server that does not answer is named with the end of its log."""
        engine = create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            try:
                conn = engine.connect()
            except OperationalError as exc:
                state = "running" if self.running() else "not running"
                raise StackError(
                    f"PostgreSQL under {self.root} ({state}) does not accept connections on "
                    f"{self.host}:{self.port}: {exc.orig or exc}\n{self.log_tail()}"
                ) from exc
            with conn:
                yield conn
        finally:
            engine.dispose()

    def _run(
        self, tool: str, *args: str, check: bool, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run one of the server's tools (as the server's user when root); past
        `timeout`, the tool and what it started are killed and StackError says so."""
        command = [str(find_bin_dir() / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        process = subprocess.Popen(
            command,
            cwd=self.root if self.root.exists() else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # killed as a group: runuser's child survives runuser
        )
        try:
            output, _ = process.communicate(timeout=timeout)
        except BaseException as exc:  # a timeout, or the test's own (pytest-timeout)
            # pg_ctl start has detached the server into a session of its own by now.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise StackError(
                    f"{tool} {' '.join(args[:2])} did not finish within {timeout:.0f}s "
                    f"(killed): {output.strip()}"
                ) from None
            raise
        done = subprocess.CompletedProcess(command, process.returncode, output)
        if check:
            done.check_returncode()
        return done

    @staticmethod
    def _server_user() -> pwd.struct_passwd:
        try:
            return pwd.getpwnam(SERVER_USER)
        except KeyError:
            raise StackError(
                f"running as root, PostgreSQL needs the system user {SERVER_USER!r} to run "
                "as; install Debian's `postgresql` package (it creates that user) or run as "
                "another user"
            ) from None

    @staticmethod
    def _own(path: Path) -> None:
        """As root, hand `path` to the server's user (PostgreSQL refuses root)."""
        if os.geteuid() != 0:
            return
        user = LocalPostgres._server_user()
        os.chown(path, user.pw_uid, user.pw_gid)


def _quoted(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
