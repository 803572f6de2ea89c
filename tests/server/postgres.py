"""A real PostgreSQL on loopback for the server tests (slow tier): ``initdb`` + ``pg_ctl`` in a
temporary folder, as the unprivileged ``nobody`` when run as root (PostgreSQL refuses root),
stopped and removed afterwards, always. Each server test gets a fresh database in it."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path


def pg_bindir() -> Path | None:
    """The folder with ``initdb`` and ``pg_ctl`` (PATH, ``pg_config``, or Debian's layout)."""
    for name in ("initdb", "pg_ctl"):
        found = shutil.which(name)
        if found and Path(found).resolve().parent.joinpath("initdb").exists():
            return Path(found).resolve().parent
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if out.returncode == 0 and Path(out.stdout.strip(), "initdb").exists():
            return Path(out.stdout.strip())
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgCluster:
    root: Path
    bindir: Path
    port: int
    as_user: list[str]

    @property
    def admin_url(self) -> str:
        return f"postgresql://rltune@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://rltune@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, timeout: int = 120) -> None:
        proc = subprocess.run([*self.as_user, *args], capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode != 0:
            log = self.root / "pg.log"
            raise RuntimeError(f"{args[0]} failed: {proc.stdout}{proc.stderr}"
                               + (log.read_text()[-3000:] if log.exists() else ""))

    def sql(self, statement: str, database: str = "postgres") -> None:
        """One statement outside a transaction (CREATE/DROP DATABASE) through ``psql``."""
        self._run(str(self.bindir / "psql"), "-h", "127.0.0.1", "-p", str(self.port),
                  "-U", "rltune", "-d", database, "-v", "ON_ERROR_STOP=1", "-c", statement)

    def new_database(self) -> str:
        """A fresh empty database; returns its URL."""
        name = "t_" + uuid.uuid4().hex[:12]
        self.sql(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            if (self.root / "data" / "postmaster.pid").exists():
                    self._run(str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-m",
                          "immediate", "-w", "stop", timeout=60)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def start_postgres() -> PgCluster:
    """initdb + pg_ctl start on 127.0.0.1 (trust auth for the ``rltune`` superuser, loopback
    only, no Unix socket outside the temp folder, fsync off: test data only)."""
    bindir = pg_bindir()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL's initdb was not found")
    root = Path(tempfile.mkdtemp(prefix="rltune-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        as_user = ["runuser", "-u", "nobody", "--"]
    cluster = PgCluster(root, bindir, _free_port(), as_user)
    try:
        cluster._run(str(bindir / "initdb"), "-D", str(root / "data"), "-U", "rltune",
                     "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C")
        opts = (f"-p {cluster.port} -c listen_addresses=127.0.0.1 "
                f"-c unix_socket_directories={root} -c fsync=off -c max_connections=200")
        cluster._run(str(bindir / "pg_ctl"), "-D", str(root / "data"), "-o", opts,
                     "-l", str(root / "pg.log"), "-w", "-t", "60", "start")
    except BaseException:
        cluster.stop()
        raise
    return cluster
