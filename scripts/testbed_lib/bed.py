"""One test bed: its layout on disk, and starting/stopping each node's sshd and dockerd."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import procs

IMAGE = "sparktui-base:bookworm"
# iperf3 and ping: the fabric check runs them on the nodes, i.e. on this host through their sshd
PACKAGES = {"dockerd": "docker.io", "sshd": "openssh-server", "debootstrap": "debootstrap", "tmux": "tmux",
            "iperf3": "iperf3", "ping": "iputils-ping"}
SBIN = {"sshd": "/usr/sbin/sshd", "dockerd": "/usr/sbin/dockerd"}


def say(msg: str) -> None:
    print(f"testbed: {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class NodeDirs:
    name: str
    addr: str
    port: int
    dir: Path

    @property
    def bin(self) -> Path:
        return self.dir / "bin"

    @property
    def sock(self) -> Path:
        return self.dir / "docker.sock"

    @property
    def sshd_pid(self) -> Path:
        return self.dir / "sshd.pid"

    @property
    def docker_pid(self) -> Path:
        return self.dir / "docker.pid"

    @property
    def host_key(self) -> Path:
        return self.dir / "ssh_host_ed25519_key"


class Bed:
    def __init__(self) -> None:
        env = os.environ
        self.dir = Path(env.get("SPARKTUI_TESTBED_DIR") or "/tmp/sparktui-testbed").resolve()
        self.net = env.get("SPARKTUI_TESTBED_NET") or "127.0.0"
        self.first = int(env.get("SPARKTUI_TESTBED_FIRST") or 2)
        self.port = int(env.get("SPARKTUI_TESTBED_PORT") or 22)
        self.port_named = bool(env.get("SPARKTUI_TESTBED_PORT"))
        self.saved = False
        self.cache = Path(env.get("SPARKTUI_TESTBED_CACHE") or "/var/cache/sparktui-testbed")
        self.prefix = str(self.dir) + "/"
        self.client_key = self.dir / "client" / "id_ed25519"
        self.known_hosts = self.dir / "client" / "known_hosts"
        self.authorized = self.dir / "client" / "authorized_keys"
        self.ssh_config = self.dir / "client" / "ssh_config"
        self.state_file = self.dir / "bed.json"
        try:  # an existing bed keeps the addresses it was made with
            saved = json.loads(self.state_file.read_text())
            self.net, self.first, self.port = saved["net"], int(saved["first"]), int(saved["port"])
            self.saved = True
        except (OSError, ValueError, KeyError):
            pass

    def choose_port(self, count: int) -> None:
        """A new bed without SPARKTUI_TESTBED_PORT: 22 only when no sshd of this host (typically on
        0.0.0.0:22) holds it for the nodes' addresses, else the first free of 2222, 2223, ..."""
        if self.saved or self.port_named:
            return
        addrs = [f"{self.net}.{self.first + i}" for i in range(count)]
        for port in (22, *range(2222, 2300)):
            if all(_port_free(a, port) for a in addrs):
                if port != 22:
                    say(f"port 22 is taken on {addrs[0]} (this host's sshd?): the nodes' sshd use {port}")
                self.port = port
                return
        raise RuntimeError(f"no free sshd port for {', '.join(addrs)}; set SPARKTUI_TESTBED_PORT")

    # ------------------------------------------------------------------ layout
    def nodes(self, count: int | None = None) -> list[NodeDirs]:
        if count is None:
            try:
                count = json.loads(self.state_file.read_text())["nodes"]
            except (OSError, ValueError, KeyError):
                count = 0
        out = []
        for i in range(count):
            name = f"spark{i + 1}"
            out.append(NodeDirs(name, f"{self.net}.{self.first + i}", self.port, self.dir / "nodes" / name))
        return out

    def node(self, name: str) -> NodeDirs:
        for n in self.nodes():
            if n.name == name:
                return n
        raise SystemExit(f"testbed: no node {name!r} in {self.dir} (have: "
                         f"{', '.join(n.name for n in self.nodes()) or 'none; run up first'})")

    # ------------------------------------------------------------------ prerequisites
    def ensure_packages(self) -> None:
        def missing() -> list[str]:
            return sorted({pkg for tool, pkg in PACKAGES.items()
                           if not (shutil.which(tool) or Path(SBIN.get(tool, "/nonexistent")).exists())})

        if not missing():
            return
        self.cache.mkdir(parents=True, exist_ok=True)
        with open(self.cache / "apt.lock", "w") as lock:  # two beds coming up at once: one apt-get at a time
            fcntl.flock(lock, fcntl.LOCK_EX)
            if need := missing():
                say(f"installing {' '.join(need)} with apt-get")
                subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *need], check=True,
                               env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})

    def ensure_base_tarball(self) -> Path:
        """debootstrap once, keep the tarball; a lock serialises two beds building at once."""
        self.cache.mkdir(parents=True, exist_ok=True)
        tarball = self.cache / "base-bookworm.tar"
        with open(self.cache / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if tarball.exists():
                return tarball
            root = self.cache / "rootfs.build"
            if not (root / "usr" / "bin" / "python3").exists():
                shutil.rmtree(root, ignore_errors=True)
                say("building the base image with debootstrap (once, ~40 s)")
                subprocess.run(["debootstrap", "--variant=minbase", "--include=python3,procps,iproute2",
                                "bookworm", str(root), "http://deb.debian.org/debian"], check=True,
                               stdout=subprocess.DEVNULL)
            tmp = tarball.with_suffix(".tmp")
            subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(tmp), "."], check=True)
            tmp.rename(tarball)
            shutil.rmtree(root, ignore_errors=True)
            return tarball

    def ensure_client_keys(self) -> None:
        self.client_key.parent.mkdir(parents=True, exist_ok=True)
        if not self.client_key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sparktui-testbed",
                            "-f", str(self.client_key)], check=True)
        self.authorized.write_text(Path(str(self.client_key) + ".pub").read_text())
        os.chmod(self.client_key, 0o600)

    # ------------------------------------------------------------------ one node
    def write_node_files(self, n: NodeDirs) -> None:
        for d in (n.dir, n.bin, n.dir / "home", n.dir / "docker" / "data", n.dir / "docker" / "exec"):
            d.mkdir(parents=True, exist_ok=True)
        if not n.host_key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{n.name}-host",
                            "-f", str(n.host_key)], check=True)
        path = f"{n.bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        # HOME: sessions get their own (empty) home, so this host's ~/.bashrc (pyenv rehash with a
        # lock file, ~0.5 s per command) neither runs on every command nor gets killed half-way
        cfg_path = n.dir / "sshd_config"
        old = cfg_path.read_text() if cfg_path.exists() else None
        cfg_path.write_text(f"""\
# sparktui test bed, node {n.name}
ListenAddress {n.addr}:{n.port}
HostKey {n.host_key}
PidFile {n.sshd_pid}
AuthorizedKeysFile {self.authorized}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowTcpForwarding yes
AllowStreamLocalForwarding yes
X11Forwarding no
PrintMotd no
Subsystem sftp internal-sftp
LogLevel VERBOSE
SetEnv PATH={path} HOME={n.dir}/home DOCKER_HOST=unix://{n.sock} {procs.MARK}={n.dir}/
""")
        self.write_ssh_wrappers(n)
        pid = procs.read_pid(n.sshd_pid)
        if old is not None and old != cfg_path.read_text() and pid:
            os.kill(pid, signal.SIGHUP)  # sshd re-execs with the new config; sessions stay
            say(f"{n.name}: sshd reloaded with the new config")

    def write_ssh_wrappers(self, n: NodeDirs) -> None:
        """`ssh`/`scp` in the node's bin dir (first on a session's PATH): node-to-node SSH is passwordless
        as between real Sparks (launch-cluster.sh relies on it).  A wrapper, not ~/.ssh: OpenSSH reads
        ~/.ssh from the passwd home (/root), not from the session's $HOME."""
        self.ssh_config.parent.mkdir(parents=True, exist_ok=True)
        self.ssh_config.write_text(f"""\
# sparktui test bed: ssh between bed nodes (used through <node dir>/bin/ssh)
Host *
  User root
  Port {self.port}
  IdentityFile {self.client_key}
  IdentitiesOnly yes
  UserKnownHostsFile {self.known_hosts}
  StrictHostKeyChecking yes
""")
        for tool in ("ssh", "scp"):
            w = n.bin / tool
            # the -o before "$@" wins (OpenSSH keeps the first value): host keys are verified whatever
            # a script run on the node passes after it
            w.write_text(f'#!/bin/sh\nexec /usr/bin/{tool} -F "{self.ssh_config}" -o StrictHostKeyChecking=yes "$@"\n')
            os.chmod(w, 0o755)

    def sshd_running(self, n: NodeDirs) -> bool:
        return procs.alive(procs.read_pid(n.sshd_pid))

    def dockerd_running(self, n: NodeDirs) -> bool:
        return procs.alive(procs.read_pid(n.docker_pid)) and n.sock.exists()

    def start_sshd(self, n: NodeDirs) -> None:
        if self.sshd_running(n):
            return
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
        n.sshd_pid.unlink(missing_ok=True)
        log = n.dir / "sshd.log"
        start = log.stat().st_size if log.exists() else 0
        r = subprocess.run([SBIN["sshd"], "-f", str(n.dir / "sshd_config"), "-E", str(log)],
                           capture_output=True, text=True, env=self.daemon_env(n))
        try:
            if r.returncode != 0:
                raise RuntimeError(f"sshd exited {r.returncode}")
            procs.wait_for(lambda: self.sshd_running(n) and _port_open(n.addr, n.port), 10, f"sshd of {n.name}")
            procs.record(self.dir, procs.read_pid(n.sshd_pid), f"sshd of {n.name}")
        except RuntimeError as exc:  # say why: sshd wrote it in its log (e.g. "Address already in use")
            raise RuntimeError(f"sshd of {n.name} on {n.addr}:{n.port} did not start: "
                               f"{sshd_cause(log, start, r.stderr) or exc}") from None

    def start_dockerd(self, n: NodeDirs) -> None:
        if self.dockerd_running(n):
            return
        n.sock.unlink(missing_ok=True)
        log = open(n.dir / "dockerd.log", "ab")
        # live-restore: containers keep running while the daemon is down, as on a node that only
        # dropped off the network; their output is buffered and logged once dockerd is back
        proc = subprocess.Popen(
            [SBIN["dockerd"], "--data-root", str(n.dir / "docker" / "data"), "--exec-root",
             str(n.dir / "docker" / "exec"), "-H", f"unix://{n.sock}", "--pidfile", str(n.docker_pid),
             "--bridge", "none", "--iptables=false", "--ip6tables=false", "--live-restore",
             "--log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
            env=self.daemon_env(n))
        log.close()
        procs.record(self.dir, proc.pid, f"dockerd of {n.name}")
        procs.wait_for(lambda: self.docker_ok(n), 30, f"dockerd of {n.name} (see {n.dir}/dockerd.log)")

    def daemon_env(self, n: NodeDirs) -> dict:
        """The environment of a daemon the bed starts: marked as the bed's, a mark its children
        (containerd, every shim) inherit, so ``down`` finds them without reading command lines."""
        return {**os.environ, procs.DAEMON_MARK: f"{n.dir}/"}

    def docker(self, n: NodeDirs, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "-H", f"unix://{n.sock}", *args], check=check, capture_output=True, **kw)

    def docker_ok(self, n: NodeDirs) -> bool:
        return n.sock.exists() and self.docker(n, "version", "--format", "{{.Server.Version}}",
                                               check=False, timeout=10).returncode == 0

    def image_id(self, n: NodeDirs) -> str | None:
        r = self.docker(n, "image", "inspect", "--format", "{{.Id}}", IMAGE, check=False, timeout=60)
        return r.stdout.decode().strip() if r.returncode == 0 else None

    def ensure_base_archive(self, n: NodeDirs, rootfs: Path) -> tuple[Path, str]:
        """The base image as a cached `docker save` archive and its image ID.  `docker import` stamps
        each import with its own creation time, so importing the rootfs into every node gave every node
        another image ID (and doctor's image_id check rightly failed): import once, into ``n``, save
        that, and load the same archive everywhere."""
        archive = self.cache / "base-bookworm.image.tar"
        id_file = self.cache / "base-bookworm.image.id"
        with open(self.cache / "lock", "w") as lock:  # the cache is shared by every bed on this host
            fcntl.flock(lock, fcntl.LOCK_EX)
            if archive.exists() and id_file.exists():
                return archive, id_file.read_text().strip()
            say(f"importing {IMAGE} into {n.name} (once; every node then loads the same archive)")
            self.docker(n, "import", "--change", 'CMD ["/bin/bash"]', str(rootfs), IMAGE, timeout=600)
            image_id = self.image_id(n)
            if not image_id:
                raise RuntimeError(f"{n.name}: {IMAGE} is not there after docker import")
            tmp = archive.with_suffix(".tmp")
            self.docker(n, "save", "-o", str(tmp), IMAGE, timeout=600)
            id_file.write_text(image_id + "\n")  # before the archive: an archive alone is not trusted
            tmp.rename(archive)
            return archive, image_id

    def ensure_image(self, n: NodeDirs, archive: Path, want: str) -> None:
        """``IMAGE`` on ``n`` with the ID ``want``; a node whose image differs (an older bed imported per
        node) gets the archive loaded, which moves the tag onto the shared ID."""
        if self.image_id(n) == want:
            return
        say(f"loading {IMAGE} into {n.name}")
        self.docker(n, "load", "-q", "-i", str(archive), timeout=600)
        got = self.image_id(n)
        if got != want:
            raise RuntimeError(f"{n.name}: {IMAGE} is {got} after docker load, not {want} "
                               f"(remove {archive} and run up again)")

    def stop_sshd(self, n: NodeDirs) -> None:
        procs.kill_tree(procs.read_pid(n.sshd_pid))
        # sessions whose listener already died (reparented to init) carry the node mark
        for pid in procs.marked(f"{n.dir}/"):
            procs.kill_tree(pid)
        n.sshd_pid.unlink(missing_ok=True)

    def stop_dockerd(self, n: NodeDirs) -> None:
        procs.stop_gracefully(procs.read_pid(n.docker_pid))
        n.docker_pid.unlink(missing_ok=True)

    # ------------------------------------------------------------------ whole bed
    def write_known_hosts(self, nodes: list[NodeDirs]) -> None:
        lines = []
        for n in nodes:
            pub = Path(str(n.host_key) + ".pub").read_text().split()
            host = n.addr if n.port == 22 else f"[{n.addr}]:{n.port}"
            lines.append(f"{host} {pub[0]} {pub[1]}\n")
        self.known_hosts.write_text("".join(lines))

    def write_config(self, nodes: list[NodeDirs]) -> Path:
        parts = ['# written by scripts/testbed: the test bed\'s nodes (real sshd + dockerd on loopback)\n',
                 '[cluster]\nname = "vllm_node"\nimage = "' + IMAGE + '"\ntensor_parallel = ' + str(len(nodes)) + "\n"]
        for i, n in enumerate(nodes):
            parts.append(f"""
[[node]]
name = "{n.name}"
backend = "ssh"
host = "{n.addr}"
port = {n.port}
user = "root"
identity_file = "{self.client_key}"
known_hosts = "{self.known_hosts}"
docker_socket = "{n.sock}"
fabric_ip = "{n.addr}"
fabric_if = "lo"
role = "{'head' if i == 0 else 'worker'}"
""")
        path = self.dir / "cluster.toml"
        path.write_text("".join(parts))
        return path

    def ssh_check(self, n: NodeDirs) -> None:
        r = subprocess.run(["ssh", "-F", "/dev/null", "-i", str(self.client_key), "-p", str(n.port),
                            "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                            "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", f"root@{n.addr}",
                            "docker", "info", "--format", "{{.Name}}"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"ssh to {n.name} ({n.addr}) failed: {r.stderr.strip()}")

    def save_state(self, count: int) -> None:
        self.state_file.write_text(json.dumps({"nodes": count, "net": self.net, "first": self.first,
                                               "port": self.port}))


def sshd_cause(log: Path, start: int, stderr: str = "") -> str:
    """The line of sshd's log (written since ``start``) or stderr that says why it did not start."""
    try:
        with open(log, "rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        text = ""
    lines = [ln.strip() for ln in (text + "\n" + (stderr or "")).splitlines() if ln.strip()]
    for key in ("already in use", "Cannot bind", "Bind to port", "fatal", "error", "Bad configuration"):
        hit = next((ln for ln in lines if key.lower() in ln.lower()), None)
        if hit:
            return hit[:300]
    return lines[-1][:300] if lines else ""


def _port_free(addr: str, port: int) -> bool:
    s = socket.socket()
    try:  # no SO_REUSEADDR: a listener on 0.0.0.0:port must make this fail, as it makes sshd fail
        s.bind((addr, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _port_open(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=0.5):
            return True
    except OSError:
        return False
