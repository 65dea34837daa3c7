"""Real PostgreSQL and Redis servers, started on loopback for the tests and the benchmarks.

Nothing here imports pytest, so the benchmarks can use it too::

    from tests.servers import PostgresServer, RedisServer

    with PostgresServer() as pg, RedisServer() as rds:
        url = pg.create_database("bench")  # postgresql+asyncpg://postgres@127.0.0.1:PORT/bench
        ...

Each server runs in its own temporary directory (data, unix socket, log), listens on a free
TCP port on 127.0.0.1 only and is thrown away by ``stop()``. PostgreSQL refuses to run as root,
so when this process is root ``initdb`` and ``postgres`` run as the ``postgres`` system user
(created by Debian's ``postgresql`` package); otherwise they run as the current user. A
cluster the distribution may have started on port 5432 is never used.

``ExternalPostgres`` and ``ExternalRedis`` wrap a server someone else runs, with the same
interface (``start()``/``stop()`` do nothing).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "ExternalPostgres",
    "ExternalRedis",
    "PostgresServer",
    "RedisServer",
    "ServerStartError",
    "find_postgres_bin",
    "find_redis_server",
]

DEFAULT_START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
LOG_TAIL_LINES = 40
PORT_ATTEMPTS = 3  # a free port can be taken by someone else before the server binds it

_DB_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_PG_BINARIES = ("initdb", "postgres")


class ServerStartError(RuntimeError):
    """A server did not start (or did not accept connections in time)."""


class _PortInUse(Exception):
    pass


# --------------------------------------------------------------------------- discovery


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _version_key(path: Path) -> tuple[int, ...]:
    # /usr/lib/postgresql/15/bin -> (15,); /usr/pgsql-9.6/bin -> (9, 6)
    digits = re.findall(r"\d+", path.parent.name)
    return tuple(int(d) for d in digits)


def find_postgres_bin() -> Path | None:
    """The directory holding ``initdb`` and ``postgres`` (newest version first), or None.

    Looks at Debian/Ubuntu's /usr/lib/postgresql/<ver>/bin, RHEL's /usr/pgsql-<ver>/bin, then
    at the directory of ``initdb``/``postgres``/``pg_ctl`` found on PATH.
    """
    candidates: list[Path] = []
    for pattern in ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin"):
        found = (Path(p) for p in glob.glob(pattern))
        candidates.extend(sorted(found, key=_version_key, reverse=True))
    for name in ("initdb", "postgres", "pg_ctl"):
        located = shutil.which(name)
        if located:
            candidates.append(Path(located).resolve().parent)
    for directory in candidates:
        if all(_executable(directory / binary) for binary in _PG_BINARIES):
            return directory
    return None


def find_redis_server() -> str | None:
    """The path of ``redis-server`` (PATH first, then the usual places), or None."""
    located = shutil.which("redis-server")
    if located:
        return located
    for candidate in (
        "/usr/bin/redis-server",
        "/usr/sbin/redis-server",
        "/usr/local/bin/redis-server",
    ):
        if _executable(Path(candidate)):
            return candidate
    return None


# --------------------------------------------------------------------------- helpers


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    if path is None:
        return "(no log)"
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(could not read {path}: {exc})"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(log is empty)"


def _traversable_by_others(directory: Path) -> bool:
    """Whether every component of ``directory`` can be entered by another (unprivileged) user."""
    current = directory.resolve()
    for part in (current, *current.parents):
        try:
            if not part.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def _temp_base(for_other_user: bool) -> str | None:
    """Where to make the temporary directory: the default, unless another user can't reach it
    or the path would make the unix socket path too long (about 107 bytes on Linux)."""
    default = Path(tempfile.gettempdir())
    too_long = len(str(default)) > 50
    if too_long or (for_other_user and not _traversable_by_others(default)):
        return "/tmp"
    return None


def _clean_env(home: Path) -> dict[str, str]:
    """The environment for server processes: no libpq PG* variables, a reachable HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["HOME"] = str(home)
    env["LC_ALL"] = "C"
    return env


def _port_of(url: str, default: int) -> int:
    port = urlsplit(url).port
    return port if port is not None else default


# --------------------------------------------------------------------------- base


class _ManagedServer:
    """A server process in its own session and temporary directory."""

    name = "server"

    def __init__(self, *, startup_timeout: float = DEFAULT_START_TIMEOUT) -> None:
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None  # how long the last start() took
        self._tmpdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._log_path: Path | None = None
        self._stop_signal = signal.SIGTERM

    # -- public interface

    @property
    def port(self) -> int:
        if self._port is None or self._proc is None:
            raise RuntimeError(f"{self.name} is not running; call start() first")
        return self._port

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def directory(self) -> Path | None:
        """The temporary directory (data, socket, log) while running."""
        return self._tmpdir

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return _tail(self._log_path, lines)

    def start(self) -> Self:
        """Start the server; returns once it accepts connections. Raises ServerStartError."""
        if self._proc is not None or self._tmpdir is not None:
            raise RuntimeError(f"{self.name} is already started")
        began = time.monotonic()
        atexit.register(self.stop)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop the server (killing it if it does not stop in time) and remove its directory.

        Safe to call more than once, and on a server that never started.
        """
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        try:
            if proc is not None:
                self._terminate(proc)
        finally:
            self._port = None
            tmpdir, self._tmpdir = self._tmpdir, None
            if tmpdir is not None:
                shutil.rmtree(tmpdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"port {self._port}" if self.running else "stopped"
        return f"<{type(self).__name__} {state}>"

    # -- for subclasses

    def _as_whom(self) -> str:
        return ""

    def _start(self) -> None:
        raise NotImplementedError

    def _make_tmpdir(self, prefix: str, *, for_other_user: bool = False) -> Path:
        base = _temp_base(for_other_user)
        self._tmpdir = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        return self._tmpdir

    def _launch(self, argv: Sequence[str], **popen: Any) -> subprocess.Popen[bytes]:
        assert self._log_path is not None
        with open(self._log_path, "wb") as log:  # truncated on each attempt
            try:
                self._proc = subprocess.Popen(
                    list(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stop() can kill all of it
                    **popen,
                )
            except OSError as exc:
                raise ServerStartError(f"could not run {argv[0]}{self._as_whom()}: {exc}") from exc
        return self._proc

    def _launch_on_free_port(
        self, launch: Callable[[int], None], ready: Callable[[], bool]
    ) -> None:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._port = _free_port()
            launch(self._port)
            try:
                self._wait_ready(ready)
                return
            except _PortInUse:
                proc, self._proc = self._proc, None
                if proc is not None:
                    self._terminate(proc)
                if attempt == PORT_ATTEMPTS:
                    raise ServerStartError(
                        f"{self.name} could not bind a port on 127.0.0.1 after {attempt} "
                        f"attempts; log tail:\n{self.log_tail()}"
                    ) from None

    def _wait_ready(self, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            proc = self._proc
            assert proc is not None
            code = proc.poll()
            if code is not None:
                log = self.log_tail()
                if "Address already in use" in log:
                    raise _PortInUse
                raise ServerStartError(
                    f"{self.name} exited with code {code} before accepting connections on "
                    f"127.0.0.1:{self._port}; log tail:\n{log}"
                )
            if ready():
                return
            if time.monotonic() > deadline:
                if proc.poll() is not None:
                    continue  # it exited meanwhile: report that, with its log
                raise ServerStartError(
                    f"{self.name} did not accept connections on 127.0.0.1:{self._port} within "
                    f"{self.startup_timeout:g} s; log tail:\n{self.log_tail()}"
                )
            time.sleep(0.02)

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        def signal_group(sig: signal.Signals) -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)

        if proc.poll() is None:
            signal_group(self._stop_signal)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                signal_group(signal.SIGKILL)
                proc.wait(timeout=STOP_TIMEOUT)
        # Whatever is left in the group (a postgres backend, say) goes too.
        signal_group(signal.SIGKILL)


# --------------------------------------------------------------------------- PostgreSQL


def _run_in_thread(coro_factory: Callable[[], Any]) -> Any:
    """Run a coroutine on a fresh event loop in a helper thread: usable from sync code and from
    inside a running event loop alike."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coro_factory())
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="contextgate-postgres-admin", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _quote_database(name: str) -> str:
    if not _DB_NAME.fullmatch(name):
        raise ValueError(
            f"database name {name!r} must be a letter or _ followed by up to 62 letters, "
            "digits or _"
        )
    return f'"{name}"'


class _PostgresDatabases:
    """Create and drop databases on a server reached through ``self.dsn``."""

    @property
    def dsn(self) -> str:
        raise NotImplementedError

    def database_url(self, name: str) -> str:
        """The SQLAlchemy async URL of database ``name`` on this server."""
        _quote_database(name)
        parts = urlsplit(self.dsn)
        return urlunsplit(("postgresql+asyncpg", parts.netloc, f"/{name}", parts.query, ""))

    def execute(self, *statements: str, database: str | None = None) -> list[Any]:
        """Run SQL statements one by one (outside a transaction) as the admin user; returns
        the rows of the last one."""
        import asyncpg  # a project dependency; imported lazily to keep this module light

        dsn = self.dsn
        if database is not None:
            _quote_database(database)
            parts = urlsplit(dsn)
            dsn = urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, ""))

        async def run() -> list[Any]:
            conn = await asyncpg.connect(dsn, timeout=10)
            try:
                rows: list[Any] = []
                for statement in statements:
                    rows = list(await conn.fetch(statement))
                return rows
            finally:
                await conn.close()

        result: list[Any] = _run_in_thread(run)
        return result

    def create_database(self, name: str) -> str:
        """Create database ``name``; returns its ``postgresql+asyncpg://`` URL."""
        self.execute(f"CREATE DATABASE {_quote_database(name)}")
        return self.database_url(name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name`` if it exists, ending any connections still open to it."""
        self.execute(f"DROP DATABASE IF EXISTS {_quote_database(name)} WITH (FORCE)")


class PostgresServer(_PostgresDatabases, _ManagedServer):
    """A throw-away PostgreSQL cluster on 127.0.0.1 (trust auth, no fsync), superuser postgres."""

    name = "PostgreSQL"
    settings: dict[str, str] = {
        "listen_addresses": "127.0.0.1",
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "max_connections": "200",
        "logging_collector": "off",
    }

    def __init__(
        self,
        *,
        bin_dir: Path | str | None = None,
        startup_timeout: float = DEFAULT_START_TIMEOUT,
        user: str = "postgres",
    ) -> None:
        super().__init__(startup_timeout=startup_timeout)
        self._bin_dir = Path(bin_dir) if bin_dir is not None else None
        self._run_as_user = user  # the system user to run as when we are root
        self._stop_signal = signal.SIGINT  # "fast" shutdown: ends sessions, no waiting

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def bin_dir(self) -> Path | None:
        return self._bin_dir

    def _identity(self) -> tuple[int, int] | None:
        """(uid, gid) of the user to run as when we are root; None when we are not root."""
        if os.geteuid() != 0:
            return None
        import pwd

        try:
            entry = pwd.getpwnam(self._run_as_user)
        except KeyError:
            raise ServerStartError(
                f"running as root, but there is no {self._run_as_user!r} system user to run "
                "PostgreSQL as (PostgreSQL refuses to run as root; the postgresql package "
                "creates that user)"
            ) from None
        return entry.pw_uid, entry.pw_gid

    def _as_whom(self) -> str:
        return f" as user {self._run_as_user!r}" if os.geteuid() == 0 else ""

    def _start(self) -> None:
        bin_dir = self._bin_dir or find_postgres_bin()
        if bin_dir is None:
            raise ServerStartError(
                "PostgreSQL binaries (initdb, postgres) not found; install postgresql "
                "(Debian: apt-get install postgresql)"
            )
        missing = [b for b in _PG_BINARIES if not _executable(bin_dir / b)]
        if missing:
            raise ServerStartError(f"{', '.join(missing)} not found in {bin_dir}")
        self._bin_dir = bin_dir

        owner = self._identity()
        tmp = self._make_tmpdir("contextgate-pg-", for_other_user=owner is not None)
        sockets = tmp / "sock"
        sockets.mkdir()
        data = tmp / "data"
        self._log_path = tmp / "postgres.log"
        self._log_path.touch()
        if owner is not None:
            for path in (tmp, sockets, self._log_path):
                os.chown(path, *owner)
        env = _clean_env(tmp)
        common: dict[str, Any] = {"cwd": tmp, "env": env}
        if owner is not None:  # drop root before exec, like setpriv/runuser would
            common.update(user=owner[0], group=owner[1], extra_groups=[])

        initdb = [
            str(bin_dir / "initdb"),
            "--pgdata",
            str(data),
            "--username",
            "postgres",
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--locale",
            "C",
            "--no-sync",
        ]
        try:
            done = subprocess.run(
                initdb,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=self.startup_timeout,
                check=False,
                **common,
            )
        except subprocess.TimeoutExpired as exc:
            output = (exc.output or b"").decode(errors="replace")
            raise ServerStartError(
                f"initdb did not finish within {self.startup_timeout:g} s; output:\n{output}"
            ) from None
        except OSError as exc:
            raise ServerStartError(f"could not run {initdb[0]}{self._as_whom()}: {exc}") from exc
        if done.returncode != 0:
            output = done.stdout.decode(errors="replace").strip()
            raise ServerStartError(
                f"initdb failed (exit code {done.returncode}); output:\n{output}"
            )

        # Trust, but only on the unix socket in our directory and on IPv4 loopback.
        (data / "pg_hba.conf").write_text(
            "# written by tests/servers.py\nlocal all all trust\nhost  all all 127.0.0.1/32 trust\n"
        )

        def launch(port: int) -> None:
            argv = [str(bin_dir / "postgres"), "-D", str(data)]
            settings = {**self.settings, "port": str(port), "unix_socket_directories": str(sockets)}
            for key, value in settings.items():
                argv += ["-c", f"{key}={value}"]
            self._launch(argv, **common)

        def ready() -> bool:
            assert self._port is not None
            assert self._proc is not None
            return _postmaster_ready(data, self._port, self._proc.pid)

        self._launch_on_free_port(launch, ready)


def _postmaster_ready(data: Path, port: int, pid: int) -> bool:
    """Whether *our* postmaster accepts connections: its postmaster.pid (PostgreSQL 10+) names
    it, the port, and status "ready" (so it has bound the port; a foreign server that grabbed
    the port first cannot fool this), and the port takes TCP connections."""
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
    except OSError:
        return False
    if len(lines) < 8 or lines[0].strip() != str(pid) or lines[3].strip() != str(port):
        return False
    if lines[7].strip() != "ready":
        return False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class ExternalPostgres(_PostgresDatabases):
    """A PostgreSQL server someone else runs, given by a URL with a user allowed to create
    databases (``postgresql://user:password@host:port/postgres``; a ``+asyncpg`` suffix on
    the scheme is accepted)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if not parts.scheme.startswith("postgres"):
            raise ValueError(f"not a PostgreSQL URL: {url!r}")
        path = parts.path if parts.path not in ("", "/") else "/postgres"
        self._dsn = urlunsplit(("postgresql", parts.netloc, path, parts.query, ""))
        self.startup_seconds: float | None = 0.0

    @property
    def dsn(self) -> str:
        return self._dsn

    @property
    def port(self) -> int:
        return _port_of(self._dsn, 5432)

    def start(self) -> Self:
        return self

    def stop(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    def __repr__(self) -> str:
        return f"<ExternalPostgres {urlsplit(self._dsn).hostname}:{self.port}>"


# --------------------------------------------------------------------------- Redis


def _redis_ready(port: int, pid: int) -> bool:
    """Whether *our* redis-server answers on the port: INFO's process_id must be ``pid`` (a
    foreign server that grabbed the port first cannot fool this)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"INFO server\r\n")
            reply = b""
            while b"\r\n" not in reply:  # "$<length>\r\n<body>\r\n", or "-LOADING ..."
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                reply += chunk
            header, _, body = reply.partition(b"\r\n")
            if not header.startswith(b"$"):
                return False
            length = int(header[1:])
            while len(body) < length:
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                body += chunk
    except (OSError, ValueError):
        return False
    return f"process_id:{pid}\r\n".encode() in body


def _flush(url: str, *, everything: bool) -> None:
    import redis  # a project dependency; imported lazily

    client = redis.Redis.from_url(url, socket_timeout=10)
    try:
        if everything:
            client.flushall()
        else:
            client.flushdb()
    finally:
        client.close()


class RedisServer(_ManagedServer):
    """A throw-away redis-server on 127.0.0.1 with no persistence."""

    name = "redis-server"

    def __init__(
        self, *, executable: str | None = None, startup_timeout: float = DEFAULT_START_TIMEOUT
    ) -> None:
        super().__init__(startup_timeout=startup_timeout)
        self._executable = executable
        self._stop_signal = signal.SIGTERM

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def flush(self) -> None:
        """FLUSHALL: empty every database of this (private) server."""
        _flush(self.url, everything=True)

    def _start(self) -> None:
        executable = self._executable or find_redis_server()
        if executable is None:
            raise ServerStartError(
                "redis-server not found; install it (Debian: apt-get install redis-server)"
            )
        tmp = self._make_tmpdir("contextgate-redis-")
        self._log_path = tmp / "redis.log"

        def launch(port: int) -> None:
            argv = [
                executable,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(tmp),
                "--daemonize",
                "no",
            ]
            self._launch(argv, cwd=tmp)

        def ready() -> bool:
            assert self._port is not None
            assert self._proc is not None
            return _redis_ready(self._port, self._proc.pid)

        self._launch_on_free_port(launch, ready)


class ExternalRedis:
    """A Redis server someone else runs. ``flush()`` empties only the URL's database
    (FLUSHDB), never the whole server."""

    def __init__(self, url: str) -> None:
        if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"not a Redis URL: {url!r}")
        self.url = url
        self.startup_seconds: float | None = 0.0

    @property
    def port(self) -> int:
        return _port_of(self.url, 6379)

    def flush(self) -> None:
        _flush(self.url, everything=False)

    def start(self) -> Self:
        return self

    def stop(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    def __repr__(self) -> str:
        return f"<ExternalRedis {urlsplit(self.url).hostname}:{self.port}>"
