#!/usr/bin/env python3
"""Throwaway PostgreSQL and MariaDB servers on loopback, for the Attribute Store's tests.

As a CLI, it starts the servers, runs a command with their DSNs in the environment, stops them
and exits with the command's status:

    python3 tests/support/sql_servers.py --postgres --mariadb -- CMD ARGS...

exports DEX_TEST_POSTGRES_DSN (postgres://dex@127.0.0.1:PORT/postgres) and DEX_TEST_MYSQL_DSN
(mysql://root@127.0.0.1:PORT/dextest), plus DEX_TEST_POSTGRES_PID / DEX_TEST_MYSQL_PID (the
server process, for tests that freeze it). A server that cannot start fails the run (exit 2)
with its log's tail: the tests never skip.

As a module (pytest), `start_postgres(tmpdir)` and `start_mariadb(tmpdir)` answer a handle with
.dsn, .port, .stop(), .start() (same port and data directory, e.g. after an outage), .sql(text)
(through the server's own command-line client), .enable_statement_log() and .pause()/.resume()
(SIGSTOP/SIGCONT of the server process).

Each server runs in its own temporary directory, on a free loopback port chosen at start, as
the unprivileged user `nobody` when this runs as root (initdb and mariadbd refuse root), and
dies with this process (PR_SET_PDEATHSIG), so a killed test run leaves no server behind.
Standard library only.
"""
import argparse
import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

PG_BIN = "/usr/lib/postgresql/15/bin"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
PR_SET_PDEATHSIG = 1


class ServerError(Exception):
    """A server could not be set up, started or stopped; the message says which and why."""


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class _Account:
    """Who runs the server: `nobody` when this process is root, else this user."""

    def __init__(self):
        self.switch = os.geteuid() == 0
        if self.switch:
            entry = pwd.getpwnam("nobody")
            self.uid, self.gid = entry.pw_uid, entry.pw_gid
        else:
            self.uid, self.gid = os.geteuid(), os.getegid()

    def own(self, path):
        if self.switch:
            os.chown(path, self.uid, self.gid)

    def reaches(self, path):
        """Whether this account can enter `path` (every directory on the way)."""
        if not self.switch:
            return True
        path = os.path.abspath(path)
        while True:
            st = os.stat(path)
            if st.st_uid == self.uid:
                ok = st.st_mode & 0o100
            elif st.st_gid == self.gid:
                ok = st.st_mode & 0o010
            else:
                ok = st.st_mode & 0o001
            if not ok:
                return False
            parent = os.path.dirname(path)
            if parent == path:
                return True
            path = parent

    def preexec(self, die_with_parent):
        def run():
            if self.switch:
                os.setgroups([])
                os.setgid(self.gid)
                os.setuid(self.uid)
            if die_with_parent:
                # After setuid: a change of credentials clears the parent-death signal.
                libc = ctypes.CDLL("libc.so.6", use_errno=True)
                libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        return run


def _thread_states(pid):
    """The state letter of each thread of `pid`, from /proc/<pid>/task/*/stat."""
    states = ""
    task_dir = f"/proc/{pid}/task"
    try:
        tasks = os.listdir(task_dir)
    except OSError:
        return states
    for task in tasks:
        try:
            with open(f"{task_dir}/{task}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        close = stat.rfind(") ")  # the command name may hold spaces and parentheses
        if close >= 0 and close + 2 < len(stat):
            states += stat[close + 2]
    return states


def _wait_stopped(pid, timeout_s=2.0):
    """kill() only marks a stop: each thread of a multi-threaded server stops when next
    scheduled. Returns once every thread has; raises naming their states if not in time."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = _thread_states(pid)
        if states and set(states) <= {"T", "t"}:
            return
        if time.monotonic() >= deadline:
            raise ServerError(f"process {pid} did not stop within {timeout_s} s "
                              f"(its threads' states: {states!r})")
        time.sleep(0.001)


def _run(account, argv, cwd, log_path, env=None):
    """Runs a setup command (initdb, mariadb-install-db) to its end as the server's user."""
    with open(log_path, "ab") as log:
        proc = subprocess.run(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                              preexec_fn=account.preexec(die_with_parent=True), env=env)
    if proc.returncode != 0:
        raise ServerError(f"{os.path.basename(argv[0])} failed (exit {proc.returncode}):\n"
                          + _errors(log_path) + _tail(log_path))


def _tail(path, lines=30):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


def _errors(path, lines=10):
    """The log's lines that say ERROR (the tail alone may hold only a tool's advice)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            found = [line for line in f if "ERROR" in line]
        return "".join(found[:lines])
    except OSError:
        return ""


class _Server:
    """What both servers share: the directory, the process, start/stop/pause."""

    name = "server"

    def __init__(self, tmpdir):
        self.account = _Account()
        # pytest's tmp_path sits under a root-only directory: `nobody` could not enter it, so
        # the server's directory then goes to the system's temporary directory.
        if tmpdir is not None and not self.account.reaches(tmpdir):
            tmpdir = None
        self.base = tempfile.mkdtemp(prefix=f"dex-{self.name}-", dir=tmpdir)
        os.chmod(self.base, 0o700)
        self.account.own(self.base)
        self.log_path = os.path.join(self.base, "server.log")
        self.port = _free_port()
        self.proc = None
        self.env = dict(os.environ, HOME=self.base, LC_ALL="C.UTF-8")

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self):
        """Starts the server on its port and data directory; returns when it answers SQL."""
        self.spawn()
        return self.wait_ready()

    def spawn(self):
        """Starts the server process without waiting. Call it from a thread that outlives the
        server: the parent-death signal fires when the spawning *thread* ends."""
        if self.proc is not None:
            raise ServerError(f"{self.name} is running already")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self._server_argv(), cwd=self.base, stdout=log,
                                         stderr=subprocess.STDOUT, env=self.env,
                                         preexec_fn=self.account.preexec(die_with_parent=True))

    def wait_ready(self):
        """Waits until the spawned server answers SQL."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.proc = None
                raise ServerError(f"{self.name} exited at start (exit {code}); its log:\n"
                                  + _tail(self.log_path))
            if _accepts(self.port) and self._answers():
                return self
            time.sleep(0.1)
        self.stop()
        raise ServerError(f"{self.name} did not accept connections on 127.0.0.1:{self.port} "
                          f"within {START_TIMEOUT_S} s; its log:\n" + _tail(self.log_path))

    def stop(self):
        """Stops the server (a fast shutdown, then SIGKILL); the data directory stays."""
        if self.proc is None:
            return
        self.resume()
        self.proc.send_signal(self.stop_signal)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self):
        self.stop()
        return self.start()

    def pause(self):
        """SIGSTOP: the server keeps its connections open and answers nothing."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)
            _wait_stopped(self.proc.pid)

    def resume(self):
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def remove(self):
        """Stops the server and deletes its directory."""
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def sql(self, text):
        """Runs SQL through the server's command-line client; answers its output."""
        proc = subprocess.run(self._client_argv(text), capture_output=True, text=True,
                              env=self.env, timeout=STOP_TIMEOUT_S)
        if proc.returncode != 0:
            raise ServerError(f"{self.name} client failed: {proc.stderr.strip()}")
        return proc.stdout

    def _answers(self):
        try:
            self.sql("SELECT 1")
            return True
        except (ServerError, subprocess.TimeoutExpired):
            return False


class PostgresServer(_Server):
    name = "postgres"
    stop_signal = signal.SIGINT  # fast shutdown: roll back sessions, then stop

    def __init__(self, tmpdir=None):
        super().__init__(tmpdir)
        self.data = os.path.join(self.base, "data")
        self.user = "dex"
        self.dsn = f"postgres://{self.user}@127.0.0.1:{self.port}/postgres"
        self.statement_log_path = self.log_path

    def init(self):
        initdb = os.path.join(PG_BIN, "initdb")
        if not os.path.exists(initdb):
            raise ServerError(f"no {initdb}: install the Debian package postgresql "
                              "(scripts/install-deps)")
        _run(self.account, [initdb, "-D", self.data, "-U", self.user, "--auth=trust",
                            "--no-sync", "--no-locale", "-E", "UTF8"],
             self.base, self.log_path, self.env)
        # The superuser dex connects without a password; every other role needs one, so a
        # test can make a password-protected user.
        with open(os.path.join(self.data, "pg_hba.conf"), "w", encoding="utf-8") as f:
            f.write("local all all trust\n"
                    f"host all {self.user} 127.0.0.1/32 trust\n"
                    "host all all 127.0.0.1/32 scram-sha-256\n")
        return self

    def _server_argv(self):
        return [os.path.join(PG_BIN, "postgres"), "-D", self.data, "-k", self.base,
                "-p", str(self.port), "-h", "127.0.0.1", "-c", "fsync=off",
                "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                "-c", "max_connections=50", "-c", "shared_buffers=16MB"]

    def _client_argv(self, text):
        return [os.path.join(PG_BIN, "psql"), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
                "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", "postgres",
                "-c", text]

    def enable_statement_log(self):
        """Logs every statement into the server log (statement_log_path)."""
        self.sql("ALTER SYSTEM SET log_statement = 'all'")
        self.sql("SELECT pg_reload_conf()")
        return self.statement_log_path


class MariadbServer(_Server):
    name = "mariadb"
    stop_signal = signal.SIGTERM

    def __init__(self, tmpdir=None, database="dextest"):
        super().__init__(tmpdir)
        self.data = os.path.join(self.base, "data")
        self.socket_path = os.path.join(self.base, "sock")
        # Its own temporary directory: a starting mariadbd deletes the #sql* files of its
        # tmpdir, which would be the temporary tables of another server's bootstrap.
        self.tmp = os.path.join(self.base, "tmp")
        os.mkdir(self.tmp, 0o700)
        self.account.own(self.tmp)
        self.database = database
        self.dsn = f"mysql://root@127.0.0.1:{self.port}/{database}"
        self.statement_log_path = os.path.join(self.base, "general.log")

    def init(self):
        install = shutil.which("mariadb-install-db")
        if install is None:
            raise ServerError("no mariadb-install-db: install the Debian package mariadb-server "
                              "(scripts/install-deps)")
        _run(self.account, [install, "--no-defaults", f"--datadir={self.data}",
                            "--auth-root-authentication-method=normal", "--skip-test-db",
                            "--skip-name-resolve", f"--tmpdir={self.tmp}"],
             self.base, self.log_path, self.env)
        return self

    def wait_ready(self):
        super().wait_ready()
        self.sql(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")
        return self

    def _server_argv(self):
        mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        return [mariadbd, "--no-defaults", f"--datadir={self.data}",
                f"--socket={self.socket_path}", f"--port={self.port}",
                "--bind-address=127.0.0.1", f"--pid-file={os.path.join(self.base, 'pid')}",
                f"--tmpdir={self.tmp}",
                "--skip-name-resolve", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0",
                "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M",
                "--performance-schema=OFF", "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_general_ci",
                f"--general-log-file={self.statement_log_path}"]

    def _client_argv(self, text):
        return ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(self.port), "-u",
                "root", "--batch", "--skip-column-names", "-e", text]

    def enable_statement_log(self):
        """Logs every statement into the general log (statement_log_path)."""
        self.sql("SET GLOBAL general_log = 1")
        return self.statement_log_path


def _init_or_remove(server):
    """Makes the server's data directory; on failure removes its directory and raises."""
    try:
        return server.init()
    except BaseException:
        server.remove()
        raise


def _start_or_remove(server):
    try:
        return _init_or_remove(server).start()
    except BaseException:
        server.remove()
        raise


def start_postgres(tmpdir=None):
    """A running PostgreSQL 15 (initdb'd, superuser dex without a password)."""
    return _start_or_remove(PostgresServer(tmpdir))


def start_mariadb(tmpdir=None, database="dextest"):
    """A running MariaDB (root without a password over TCP, `database` created)."""
    return _start_or_remove(MariadbServer(tmpdir, database))


def start_all(makers, tmpdir=None):
    """Starts the servers of `makers` ({name: server class}) side by side (MariaDB takes a few
    seconds); all or none: {name: server}, or ServerError naming each that failed. The data
    directories are made in threads; the servers are spawned from this thread, which outlives
    them (their parent-death signal)."""
    servers, errors = {}, {}

    def init(kind):
        try:
            servers[kind] = _init_or_remove(makers[kind](tmpdir))
        except (ServerError, OSError) as e:
            errors[kind] = e

    threads = [threading.Thread(target=init, args=(k,)) for k in makers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        if not errors:
            for server in servers.values():
                server.spawn()
            for kind, server in servers.items():
                try:
                    server.wait_ready()
                except (ServerError, OSError) as e:
                    errors[kind] = e
    finally:
        if errors:
            for server in servers.values():
                server.remove()
    if errors:
        raise ServerError("; ".join(f"{k}: {e}" for k, e in errors.items()))
    return servers


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s [--postgres] [--mariadb] -- CMD ARGS...")
    parser.add_argument("--postgres", action="store_true", help="start PostgreSQL")
    parser.add_argument("--mariadb", action="store_true", help="start MariaDB")
    parser.add_argument("--keep", action="store_true",
                        help="keep the servers' directories (logs) after the run")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run after --")
    kinds = [k for k, on in (("postgres", args.postgres), ("mariadb", args.mariadb)) if on]
    started = time.monotonic()
    try:
        makers = {"postgres": PostgresServer, "mariadb": MariadbServer}
        servers = start_all({k: makers[k] for k in kinds})
    except ServerError as e:
        print(f"sql_servers: cannot start the test servers: {e}", file=sys.stderr)
        return 2
    print(f"sql_servers: started {', '.join(kinds) or 'nothing'} in "
          f"{time.monotonic() - started:.1f} s", file=sys.stderr)
    env = dict(os.environ)
    if "postgres" in servers:
        env["DEX_TEST_POSTGRES_DSN"] = servers["postgres"].dsn
        env["DEX_TEST_POSTGRES_PID"] = str(servers["postgres"].pid)
    if "mariadb" in servers:
        env["DEX_TEST_MYSQL_DSN"] = servers["mariadb"].dsn
        env["DEX_TEST_MYSQL_PID"] = str(servers["mariadb"].pid)
    # SIGTERM (a timeout) ends the command and then the servers, through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    code = 1
    try:
        code = subprocess.call(command, env=env)
    finally:
        for server in servers.values():
            if args.keep:
                server.stop()
                print(f"sql_servers: kept {server.base}", file=sys.stderr)
            else:
                server.remove()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
