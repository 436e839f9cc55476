#!/usr/bin/python3
"""pgserver.py -- a throwaway PostgreSQL for the tests (Debian's `postgresql` package).

    srv = PgServer(tmpdir)
    url = srv.start()                # postgres://space@127.0.0.1:PORT/space
    url2 = srv.create_database("d1") # another database on the same server
    srv.restart(); srv.kill(); srv.stop()

The server runs as an unprivileged user (initdb refuses root; the suite runs as root): its
files live in a directory of their own, owned by that user, under tmpdir when every folder
above it lets others in, else under /tmp. It listens on 127.0.0.1 only, on a free port, with
trust authentication for loopback, and its unix socket in its own directory. fsync is off:
a test server trades durability for speed (a restart is a clean shutdown, so nothing is lost;
kill() is -9 and then recovery runs from the WAL, which works without fsync as long as the
machine itself stays up).

From a shell (tests/pg/pg-server.sh wraps this):
    pgserver.py start DIR    prints the URL; the server keeps running
    pgserver.py stop DIR
    pgserver.py stop-keep DIR   stops it, keeps its files (start again later)
    pgserver.py restart DIR
    pgserver.py createdb DIR NAME   prints the new database's URL
"""
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

USER = "space"      # the database role (initdb's superuser)
DATABASE = "space"  # the database start() creates
STATE = "pgserver.json"


def pg_bindir():
    """The newest installed server's bin folder (/usr/lib/postgresql/<major>/bin)."""
    dirs = [d for d in glob.glob("/usr/lib/postgresql/*/bin") if os.path.exists(d + "/postgres")]
    if not dirs:
        raise RuntimeError("no PostgreSQL server found under /usr/lib/postgresql "
                           "(Debian package postgresql, scripts/packages.txt)")

    def major(d):
        m = re.search(r"/postgresql/(\d+)", d)
        return int(m.group(1)) if m else 0
    return max(dirs, key=major)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _others_may_enter(path):
    """Can a user other than the owner reach path (x for others on every folder above)?"""
    p = Path(path).resolve()
    for d in [p, *p.parents]:
        if not os.stat(d).st_mode & 0o001:
            return False
    return True


class PgServer:
    def __init__(self, tmpdir, run_as="nobody"):
        self.tmpdir = Path(tmpdir)
        self.bindir = pg_bindir()
        self.root = os.geteuid() == 0
        self.run_as = run_as if self.root else None
        self.base = None
        self.port = None
        state = self.tmpdir / STATE
        if state.exists():  # a server started earlier (the shell's start, then stop)
            s = json.loads(state.read_text())
            self.base, self.port = Path(s["base"]), s["port"]

    # ---- paths ----
    @property
    def data(self):
        return self.base / "data"

    @property
    def sockdir(self):
        return self.base / "sock"

    @property
    def log(self):
        return self.base / "server.log"

    def url(self, database=DATABASE):
        return f"postgres://{USER}@127.0.0.1:{self.port}/{database}"

    # ---- running things as the server's user ----
    def _as_user(self, argv):
        if not self.run_as:
            return argv
        return ["setpriv", f"--reuid={self.run_as}", f"--regid={self.run_as_group()}",
                "--clear-groups", "--"] + argv

    def run_as_group(self):
        return "nogroup" if self.run_as == "nobody" else self.run_as

    def _run(self, argv, **kw):
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": str(self.base)}
        return subprocess.run(self._as_user(argv), env=env, cwd=self.base, check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)

    def _make_base(self):
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        where = self.tmpdir if (not self.root or _others_may_enter(self.tmpdir)) else "/tmp"
        self.base = Path(tempfile.mkdtemp(prefix="space-pg-", dir=where))
        self.sockdir.mkdir()
        if self.run_as:
            pw = pwd.getpwnam(self.run_as)
            for p in (self.base, self.sockdir):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        os.chmod(self.base, 0o755)  # clients (root) read the log; the data folder stays 0700

    def _save(self):
        (self.tmpdir / STATE).write_text(json.dumps({"base": str(self.base), "port": self.port}))

    # ---- lifecycle ----
    def start(self):
        """initdb (first time), start, create the database; returns its URL."""
        if self.base is None:
            self._make_base()
            self.port = free_port()
            self._run([f"{self.bindir}/initdb", "-D", str(self.data), "-U", USER, "-A", "trust",
                       "-E", "UTF8", "--locale=C", "--no-sync"])
            with open(self.data / "postgresql.conf", "a") as f:
                f.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                        f"unix_socket_directories = '{self.sockdir}'\n"
                        "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                        "max_connections = 200\nshared_buffers = 32MB\n")
            # trust on loopback only; the unix socket is in a folder of its own
            (self.data / "pg_hba.conf").write_text(
                "local all all trust\nhost all all 127.0.0.1/32 trust\n")
            self._save()
            self._ctl("start")
            self.psql("postgres", f"CREATE DATABASE {DATABASE}")
        else:
            self._ctl("start")
        return self.url()

    def _ctl(self, action):
        argv = [f"{self.bindir}/pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60"]
        if action in ("stop", "restart"):
            argv += ["-m", "fast"]
        try:
            self._run(argv + [action])
        except subprocess.CalledProcessError as e:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl {action} failed: {e.stdout}\n{tail}") from None

    def running(self):
        return self.base is not None and (self.data / "postmaster.pid").exists() and self.pid() > 0

    def pid(self):
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n")[0])
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return 0

    def stop(self, remove=True):
        """Stops the server (fast: open transactions roll back); remove: delete its files."""
        if self.base is None:
            return
        if self.pid():
            self._ctl("stop")
        if remove:
            shutil.rmtree(self.base, ignore_errors=True)
            (self.tmpdir / STATE).unlink(missing_ok=True)
            self.base = None

    def restart(self):
        """A clean restart on the same port: every client's connection breaks."""
        self._ctl("restart")

    def kill(self):
        """kill -9 the postmaster and its children (start() recovers from the WAL)."""
        pid = self.pid()
        if not pid:
            return
        children = subprocess.run(["pgrep", "-P", str(pid)], stdout=subprocess.PIPE,
                                  text=True).stdout.split()
        os.kill(pid, signal.SIGKILL)
        for c in children:
            try:
                os.kill(int(c), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        for _ in range(100):
            if not self.pid():
                break
            time.sleep(0.05)

    # ---- databases ----
    def psql(self, database, sql):
        """Runs constant SQL (no values from outside) as the superuser over TCP."""
        return subprocess.run([f"{self.bindir}/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At",
                               "-d", self.url(database), "-c", sql],
                              check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True).stdout

    def create_database(self, name):
        """A new empty database (name: [a-z0-9_]); returns its URL."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
            raise ValueError(f"bad database name {name!r}")
        self.psql("postgres", f"CREATE DATABASE {name}")
        return self.url(name)


def main(argv):
    if len(argv) < 3 or argv[1] not in ("start", "stop", "stop-keep", "restart", "kill", "createdb"):
        print(__doc__, file=sys.stderr)
        return 2
    srv = PgServer(argv[2])
    if argv[1] == "start":
        print(srv.start())
    elif argv[1] == "stop":
        srv.stop()
    elif argv[1] == "stop-keep":
        srv.stop(remove=False)
    elif argv[1] == "restart":
        srv.restart()
    elif argv[1] == "kill":
        srv.kill()
    else:
        print(srv.create_database(argv[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
