"""A local stack shaped like a cluster: PostgreSQL, a Prefect server and an MLflow tracking
server on it, and a Ray head, all on loopback, all under one folder.

    python -m deployments stack up --dir DIR      # start what is not running; print exports
    python -m deployments stack status --dir DIR  # each service: pid alive, health answer
    python -m deployments stack down --dir DIR    # stop what `up` started, by pid

- **PostgreSQL** (Debian's ``postgresql`` package; installed by ``install-postgresql.sh`` when
  missing): ``initdb`` into ``DIR/postgres`` as an unprivileged user (yourself, or ``nobody``
  when run as root, since PostgreSQL refuses to run as root), superuser ``stack`` with a
  generated password, scram-sha-256 authentication, listening on ``127.0.0.1`` only, no unix
  socket. Two databases: ``prefect`` and ``mlflow``.
- **Prefect server** on ``postgresql+asyncpg://.../prefect`` (``PREFECT_HOME`` in
  ``DIR/prefect``).
- **MLflow tracking server** on ``postgresql+psycopg2://.../mlflow``, artifacts under
  ``DIR/mlflow-artifacts``, served through the server (``--serve-artifacts``), so clients
  need no access to the folder.
- **Ray head** (``ray start --head --block``), its session files in ``DIR/ray``, token
  authentication with a generated token in ``DIR/ray-auth-token``. Ray listens on this
  machine's own IP, not loopback: its clients always connect there.

Every service starts in a session of its own; ``DIR/stack.json`` records its pid, port and how
to reach it (and the password, so the file is ``0600``). ``down`` signals each recorded
session (SIGTERM, then SIGKILL after a grace period) and nothing else: it never runs
``ray stop`` or ``pg_ctl`` against someone else's processes. ``DIR/stack.env`` holds the same
``export`` lines ``up`` prints. Logs are in ``DIR/logs``.

On a real cluster each piece is replaced by its managed form (see docs/deployments.md,
"Several workers"): a managed PostgreSQL, an MLflow server with object storage, a Ray cluster, and
Prefect workers on other hosts polling the same work pool.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from deployments.procs import (
    StackError,
    alive,
    http_ok,
    session_members,
    spawn,
    stop_session,
    wait_until,
)
from deployments.server import free_port

REPO = Path(__file__).resolve().parent.parent
STATE = "stack.json"
ENV_FILE = "stack.env"
RAY_TOKEN = "ray-auth-token"
PG_USER = "stack"
DATABASES = ("prefect", "mlflow")
RAY_CPUS_DEFAULT = None  # the head offers every core of this machine


@dataclass
class Service:
    name: str
    pid: int
    port: int
    url: str
    health: str | None  # an HTTP URL that answers 200 when the service is up
    log: str


@dataclass
class Stack:
    dir: str
    password: str
    services: dict[str, Service] = field(default_factory=dict)

    def exports(self) -> dict[str, str]:
        s = self.services
        out = {}
        if "postgres" in s:
            out["STACK_POSTGRES_URL"] = pg_url(self.password, s["postgres"].port, "postgres")
        if "prefect" in s:
            out["PREFECT_API_URL"] = s["prefect"].url
        if "mlflow" in s:
            out["MLFLOW_TRACKING_URI"] = s["mlflow"].url
        if "ray" in s:
            out["RAY_ADDRESS"] = s["ray"].url
            # The head requires its token (Ray's token authentication); clients read it here.
            out["RAY_AUTH_MODE"] = "token"
            out["RAY_AUTH_TOKEN_PATH"] = str(Path(self.dir) / RAY_TOKEN)
        return out

    def save(self) -> None:
        path = Path(self.dir) / STATE
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"dir": self.dir, "password": self.password,
                       "services": {k: asdict(v) for k, v in self.services.items()}}, f,
                      indent=1)
        os.replace(tmp, path)
        env = "".join(f"export {k}={v}\n" for k, v in self.exports().items())
        fd = os.open(Path(self.dir) / ENV_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(env)

    @classmethod
    def load(cls, folder: Path) -> Stack | None:
        path = folder / STATE
        if not path.exists():
            return None
        try:
            raw = json.loads(path.read_text())
            return cls(raw["dir"], raw["password"],
                       {k: Service(**v) for k, v in raw["services"].items()})
        except (ValueError, KeyError, TypeError) as exc:
            raise StackError(f"{path} is damaged ({type(exc).__name__}: {exc}); stop what it "
                             "started by hand (see DIR/logs) and remove the file") from exc


def pg_url(password: str, port: int, db: str, driver: str = "postgresql") -> str:
    return f"{driver}://{PG_USER}:{password}@127.0.0.1:{port}/{db}"


# -- PostgreSQL --------------------------------------------------------------------------------

def pg_bin(name: str) -> str:
    """A PostgreSQL program: on PATH, else Debian's versioned folder (newest version)."""
    found = shutil.which(name)
    if found:
        return found
    for folder in sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                         key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
                         reverse=True):
        if (folder / name).exists():
            return str(folder / name)
    raise StackError(f"PostgreSQL's {name} is not installed: run `sh deployments/"
                     "install-postgresql.sh` (Debian: apt-get install postgresql)")


def ensure_postgres_installed() -> None:
    try:
        pg_bin("initdb")
    except StackError:
        subprocess.run(["sh", str(REPO / "deployments" / "install-postgresql.sh")], check=False)
        pg_bin("initdb")  # still missing: the error says what to do


def pg_owner() -> tuple[int | None, int | None]:
    """(uid, gid) PostgreSQL runs as: ourselves, or ``nobody`` when we are root."""
    if os.geteuid() != 0:
        return None, None

    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def reachable_by(uid: int, folder: Path) -> bool:
    """Can ``uid`` (other than the owner) traverse to ``folder``? Each ancestor needs o+x."""
    for part in [folder, *folder.parents]:
        st = part.stat()
        if st.st_uid != uid and not st.st_mode & 0o001:
            return False
    return True


def start_postgres(stack: Stack, folder: Path) -> Service:
    data = folder / "postgres"
    log = folder / "logs" / "postgres.log"
    uid, gid = pg_owner()
    if uid is not None and not reachable_by(uid, folder):
        raise StackError(
            f"running as root, PostgreSQL runs as 'nobody', which cannot reach {folder} (a "
            "parent folder lacks o+x, as /root and pytest's temp folders do); choose a --dir "
            "under a traversable folder such as /tmp or /srv, or run as an ordinary user")
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "TZ": "UTC"}
    if not (data / "PG_VERSION").exists():
        data.mkdir(mode=0o700, exist_ok=True)
        pwfile = folder / ".pgpass-init"
        pwfile.write_text(stack.password + "\n")
        if uid is not None:
            os.chown(data, uid, gid)
            os.chown(pwfile, uid, gid)
        pwfile.chmod(0o600)
        try:
            done = subprocess.run(
                [pg_bin("initdb"), "-D", str(data), "-U", PG_USER, f"--pwfile={pwfile}",
                 "--auth=scram-sha-256", "--encoding=UTF8", "--no-instructions"],
                capture_output=True, text=True, env=env, user=uid, group=gid,
                extra_groups=[] if uid is not None else None, cwd=folder)
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            raise StackError(f"initdb failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    port = free_port()
    proc = spawn([pg_bin("postgres"), "-D", str(data), "-p", str(port),
                  "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                  "-c", "max_connections=200"], log, env, user=uid, group=gid)

    def ready() -> bool:
        probe = subprocess.run([pg_bin("pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                               capture_output=True)
        return probe.returncode == 0

    wait_until(ready, proc, "PostgreSQL", log)
    for db in DATABASES:
        create_database(stack.password, port, db)
    return Service("postgres", proc.pid, port, f"127.0.0.1:{port}", None, str(log))


def create_database(password: str, port: int, db: str) -> None:
    env = {**os.environ, "PGPASSWORD": password}
    base = ["-h", "127.0.0.1", "-p", str(port), "-U", PG_USER]
    exists = subprocess.run([pg_bin("psql"), *base, "-d", "postgres", "-tAc",
                             f"SELECT 1 FROM pg_database WHERE datname = '{db}'"],
                            capture_output=True, text=True, env=env)
    if exists.returncode != 0:
        raise StackError(f"psql could not connect: {exists.stderr.strip()}")
    if exists.stdout.strip() != "1":
        done = subprocess.run([pg_bin("createdb"), *base, db], capture_output=True, text=True,
                              env=env)
        if done.returncode != 0:
            raise StackError(f"createdb {db} failed: {done.stderr.strip()}")


# -- Prefect, MLflow, Ray ----------------------------------------------------------------------

def clean_env() -> dict[str, str]:
    """This environment without the addresses the stack itself defines (a shell that sourced
    another stack's exports must not point the new servers at the old ones)."""
    env = dict(os.environ)
    for key in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "RAY_ADDRESS"):
        env.pop(key, None)
    return env


def start_prefect(stack: Stack, folder: Path, pg_port: int) -> Service:
    port = free_port()
    log = folder / "logs" / "prefect.log"
    url = f"http://127.0.0.1:{port}/api"
    env = {**clean_env(), "PREFECT_HOME": str(folder / "prefect"),
           "PREFECT_SERVER_DATABASE_CONNECTION_URL": pg_url(stack.password, pg_port, "prefect",
                                                            "postgresql+asyncpg"),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
           "PREFECT_API_URL": url}
    proc = spawn([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                  "--port", str(port)], log, env)
    wait_until(lambda: http_ok(f"{url}/health"), proc, "the Prefect server", log)
    return Service("prefect", proc.pid, port, url, f"{url}/health", str(log))


def start_mlflow(stack: Stack, folder: Path, pg_port: int) -> Service:
    port = free_port()
    log = folder / "logs" / "mlflow.log"
    url = f"http://127.0.0.1:{port}"
    artifacts = folder / "mlflow-artifacts"
    artifacts.mkdir(exist_ok=True)
    # No job execution (MLflow's GenAI jobs, which nothing here submits): its queue is a
    # folder the server makes in /dev/shm at every start and never removes.
    env = {**clean_env(), "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1",
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    mlflow = Path(sys.executable).with_name("mlflow")
    cmd = [str(mlflow) if mlflow.exists() else "mlflow", "server",
           # explicit driver: SQLAlchemy 2.1's default for postgresql:// is psycopg 3
           "--backend-store-uri", pg_url(stack.password, pg_port, "mlflow",
                                         "postgresql+psycopg2"),
           "--artifacts-destination", str(artifacts), "--serve-artifacts",
           "--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    proc = spawn(cmd, log, env)
    wait_until(lambda: http_ok(f"{url}/health"), proc, "the MLflow server", log)
    return Service("mlflow", proc.pid, port, url, f"{url}/health", str(log))


def start_ray(folder: Path, cpus: int | None) -> Service:
    port = free_port()
    log = folder / "logs" / "ray.log"
    temp = folder / "ray"
    temp.mkdir(exist_ok=True)
    ray = Path(sys.executable).with_name("ray")
    # No --node-ip-address 127.0.0.1: Ray's clients turn a loopback address into this
    # node's IP before they connect, so the head has to listen where they will look.
    cmd = [str(ray) if ray.exists() else "ray", "start", "--head", "--block",
           "--port", str(port),
           "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", str(temp),
           "--object-store-memory", str(256 << 20)]
    if cpus:
        cmd += ["--num-cpus", str(cpus)]
    token = folder / RAY_TOKEN
    if not token.exists():  # Ray's own format: 32 random bytes, hex
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    # Ray's workers import the project (sandbox.fanout) from the checkout.
    env = {**clean_env(), "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
        # On SIGTERM the head drains for 30 s by default; a stack going down has nothing to
        # drain (a shard cut short is re-run by its caller).
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "2",
        "RAY_AUTH_TOKEN_PATH": str(token)}
    offset = log.stat().st_size if log.exists() else 0  # earlier starts' lines stay above
    proc = spawn(cmd, log, env)

    def started() -> str:
        with open(log, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    wait_until(lambda: "Ray runtime started" in started(), proc, "the Ray head", log)
    found = re.search(r"Local node IP: (\S+)", started())
    address = f"{found.group(1) if found else '127.0.0.1'}:{port}"
    return Service("ray", proc.pid, port, address, None, str(log))


# -- commands ----------------------------------------------------------------------------------

ORDER = ("postgres", "prefect", "mlflow", "ray")


def up(folder: Path, ray_cpus: int | None = RAY_CPUS_DEFAULT, *, with_ray: bool = True,
       say=print) -> Stack:
    """Start every service of the stack in ``folder`` that is not running; returns the stack."""
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "logs").mkdir(exist_ok=True)
    stack = Stack.load(folder) or Stack(str(folder), secrets.token_urlsafe(24))
    stack.save()  # the password is on disk before anything is initialised with it
    ensure_postgres_installed()
    for name in ORDER:
        if name == "ray" and not with_ray:
            continue
        running = stack.services.get(name)
        if running is not None and alive(running.pid):
            say(f"{name:9s} running (pid {running.pid})")
            continue
        t0 = time.monotonic()
        pg_port = stack.services["postgres"].port if "postgres" in stack.services else 0
        if name == "postgres":
            service = start_postgres(stack, folder)
        elif name == "prefect":
            service = start_prefect(stack, folder, pg_port)
        elif name == "mlflow":
            service = start_mlflow(stack, folder, pg_port)
        else:
            service = start_ray(folder, ray_cpus)
        stack.services[name] = service
        stack.save()
        say(f"{name:9s} started (pid {service.pid}, {service.url.split('@')[-1]}, "
            f"{time.monotonic() - t0:.1f} s)")
    return stack


def status(folder: Path) -> dict[str, str]:
    """Each recorded service -> ``up``, ``unhealthy`` (runs, does not answer) or ``down``."""
    stack = Stack.load(folder.resolve())
    if stack is None:
        return {}
    out = {}
    for name in ORDER:
        svc = stack.services.get(name)
        if svc is None:
            continue
        if not alive(svc.pid):
            out[name] = "down"
        elif svc.health is not None and not http_ok(svc.health):
            out[name] = "unhealthy"
        else:
            out[name] = "up"
    return out


def down(folder: Path, say=print) -> list[int]:
    """Stop what ``up`` started (each recorded session), the servers before their database.
    Returns pids that would not die (none, normally). Data stays in ``folder``."""
    stack = Stack.load(folder.resolve())
    if stack is None:
        say(f"no stack recorded in {folder}")
        return []
    left: list[int] = []
    for name in reversed(ORDER):
        svc = stack.services.get(name)
        if svc is None:
            continue
        # PostgreSQL: SIGINT is its "fast" shutdown (rolls back open transactions, clean).
        sig = signal.SIGINT if name == "postgres" else signal.SIGTERM
        remaining = stop_session(svc.pid, sig) if session_members(svc.pid) else []
        left += remaining
        del stack.services[name]
        stack.save()
        say(f"{name:9s} stopped" + (f" ({len(remaining)} processes would not die)"
                                    if remaining else ""))
    return left
