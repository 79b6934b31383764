"""A local PostgreSQL server for the DR state store, from the system's own binaries.

The state store's tests run against it (tests/helpers/postgres.py), and so can a
deployment that starts its database beside the replicator instead of using a
managed one. It runs the server binaries of Debian's `postgresql` package
(`make setup` installs it; `/usr/lib/postgresql/<major>/bin`, or `pg_ctl` on PATH
elsewhere), creates a cluster with `initdb` in a folder of its own and serves TCP
on one address only: no Unix socket, so nothing under /var/run is needed, and no
system service is enabled or touched.

PostgreSQL refuses to run as root; as root the server runs as the package's
`postgres` user, which then owns the folder.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import URL

from replicator.localstack.broker import port_in_use
from replicator.localstack.errors import StackError

#: Where Debian's packages put the server binaries, one folder per major version.
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
#: The system user a server started by root runs as (created by Debian's package).
SERVER_USER = "postgres"
_LOG_TAIL_LINES = 25
_STOP_TIMEOUT_S = 60


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
    password: str | None = None
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
        """True when the server of this folder runs (`pg_ctl status`)."""
        if not (self.data_dir / "PG_VERSION").exists():
            return False
        done = self._run("pg_ctl", "status", "-D", str(self.data_dir), check=False)
        return done.returncode == 0

    def up(self, timeout: float = 60.0) -> None:
        """Create the cluster on first use, then start the server and wait until it
        accepts connections; a server already running from this folder is kept."""
        if self.running():
            return
        if port_in_use(self.port):
            raise StackError(
                f"port {self.port} for PostgreSQL under {self.root} is already in use by "
                "another process; free it or choose another port"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        self._own(self.root)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        options = [
            f"-p {self.port}",
            f"-c listen_addresses={self.host}",
            "-c unix_socket_directories=''",
        ]
        if not self.durable:
            options += ["-c fsync=off", "-c full_page_writes=off", "-c synchronous_commit=off"]
        started = self._run(
            "pg_ctl",
            "start",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
            "-w",
            "-t",
            str(int(timeout)),
            "-o",
            " ".join(options),
            check=False,
        )
        if started.returncode != 0:
            raise StackError(
                f"PostgreSQL under {self.root} did not start on {self.host}:{self.port} within "
                f"{timeout:.0f}s: {started.stdout.strip()}\n{self.log_tail()}"
            )

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

    def _initdb(self) -> None:
        args = ["-D", str(self.data_dir), "-U", self.user, "-E", "UTF8", "--no-instructions"]
        password_file = self.root / ".initdb-password"
        if self.password is None:
            args += ["--auth=trust"]
        else:
            password_file.write_text(self.password, encoding="utf-8")
            password_file.chmod(0o600)
            self._own(password_file)
            args += ["--auth=scram-sha-256", f"--pwfile={password_file}"]
        try:
            done = self._run("initdb", *args, check=False)
        finally:
            password_file.unlink(missing_ok=True)
        if done.returncode != 0:
            shutil.rmtree(self.data_dir, ignore_errors=True)  # initdb's half, so a retry can run
            raise StackError(
                f"initdb of a PostgreSQL cluster in {self.data_dir} failed: {done.stdout.strip()}"
            )

    @contextmanager
    def _admin(self) -> Iterator[Connection]:
        """A connection to the `postgres` database, outside transactions (CREATE DATABASE)."""
        engine = create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                yield conn
        finally:
            engine.dispose()

    def _run(self, tool: str, *args: str, check: bool) -> subprocess.CompletedProcess[str]:
        command = [str(find_bin_dir() / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        return subprocess.run(
            command,
            cwd=self.root if self.root.exists() else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=check,
        )

    @staticmethod
    def _own(path: Path) -> None:
        """As root, hand `path` to the server's user (PostgreSQL refuses root)."""
        if os.geteuid() != 0:
            return
        try:
            user = pwd.getpwnam(SERVER_USER)
        except KeyError:
            raise StackError(
                f"running as root, PostgreSQL needs the system user {SERVER_USER!r} to run "
                "as; install Debian's `postgresql` package (it creates that user) or run as "
                "another user"
            ) from None
        os.chown(path, user.pw_uid, user.pw_gid)


def _quoted(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
