"""The harness's cluster: redis-server processes, the TCP proxy in front of
them, and the network namespace whose iptables rules cut nodes off.

Each of the N nodes is an address (a listening port of chaos_proxy) backed by
one redis-server at a time: `replace` moves the address to a standby server
that has been running for a while (a different run_id, long uptime), and
stops the old one, as the README asks of anyone who moves an address.
"""

import os
import shutil
import signal
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_call(port, *args, timeout=1.0):
    """One command over RESP; returns the reply (bytes, int, list, or an
    Exception instance for an error reply). Raises OSError when unreachable."""
    payload = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        payload += b"$%d\r\n%s\r\n" % (len(a), a)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        reader = s.makefile("rb")
        return _read_reply(reader)


def _read_reply(r):
    line = r.readline()
    if not line:
        raise OSError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest
    if kind == b"-":
        return Exception(rest.decode(errors="replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = r.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(r) for _ in range(n)]
    raise OSError("bad reply %r" % line)


def kill_process(proc):
    """SIGKILL for a server's process, paused (SIGSTOP) or not, and reaps it."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    proc.wait()


class Server:
    """One redis-server process with its own port and directory."""

    def __init__(self, root, label, aof, redis_server):
        self.label = label
        self.dir = os.path.join(root, label)
        self.port = free_port()
        self.aof = aof
        self.redis_server = redis_server
        self.proc = None
        self.started_at = None

    def start(self, wipe=False):
        if wipe and os.path.isdir(self.dir):
            shutil.rmtree(self.dir)
        os.makedirs(self.dir, exist_ok=True)
        args = [self.redis_server, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--logfile", "redis.log", "--save", "",
                "--appendonly", "yes" if self.aof else "no", "--appendfsync", "always"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.started_at = time.monotonic()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if redis_call(self.port, "PING", timeout=0.5) == b"PONG":
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("%s did not start on port %d; see %s/redis.log" % (self.label, self.port, self.dir))

    def signal(self, sig):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self):
        if self.proc is not None:
            kill_process(self.proc)
            self.proc = None

    def run_id(self):
        info = redis_call(self.port, "INFO", "server")
        for line in info.decode().splitlines():
            if line.startswith("run_id:"):
                return line.split(":", 1)[1].strip()
        return ""

    def master_replid(self):
        info = redis_call(self.port, "INFO", "replication")
        for line in info.decode().splitlines():
            if line.startswith("master_replid:"):
                return line.split(":", 1)[1].strip()
        return ""


class Proxy:
    """chaos_proxy: one listening port per node; commands on its stdin."""

    def __init__(self, binary, targets, log_path):
        spec = ["0:%d" % t for t in targets]
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([binary] + spec, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, bufsize=1)
        self.ports = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("chaos_proxy exited during start-up; see %s" % log_path)
            words = line.split()
            if words[:1] == ["proxy"]:
                self.ports.append(int(words[2]))
            elif words[:1] == ["ready"]:
                break

    def command(self, node, *words):
        self.proc.stdin.write("%d %s\n" % (node + 1, " ".join(str(w) for w in words)))
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if not answer.startswith("ok"):
            raise RuntimeError("chaos_proxy: %d %s: %s" % (node + 1, " ".join(map(str, words)), answer))
        return answer

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Firewall:
    """Partitions with iptables, inside the harness's own network namespace
    (so no rule can touch the host's traffic). Unavailable without root."""

    def __init__(self):
        self.available = os.environ.get("REDSYNC_CHAOS_NETNS") is not None and shutil.which("iptables")
        self.rules = set()

    def cut(self, port):
        for rule in (["--dport", str(port)], ["--sport", str(port)]):
            subprocess.run(["iptables", "-A", "INPUT", "-p", "tcp"] + rule + ["-j", "DROP"], check=True)
        self.rules.add(port)

    def heal(self, port):
        for rule in (["--dport", str(port)], ["--sport", str(port)]):
            subprocess.run(["iptables", "-D", "INPUT", "-p", "tcp"] + rule + ["-j", "DROP"], check=False)
        self.rules.discard(port)

    def heal_all(self):
        for port in list(self.rules):
            self.heal(port)


class Cluster:
    """N node addresses (proxy ports), each served by a redis-server, with a
    standby server per node ready to take its address."""

    def __init__(self, root, nodes, proxy_binary, redis_server):
        self.root = root
        self.redis_server = redis_server
        self.generation = [0] * nodes
        # Odd-numbered nodes (1, 3, 5) persist with an AOF, the others do not.
        self.aof = [i % 2 == 0 for i in range(nodes)]
        self.servers = [self._new_server(i) for i in range(nodes)]
        self.standbys = [self._new_server(i) for i in range(nodes)]
        for s in self.servers + self.standbys:
            s.start(wipe=True)
        self.proxy = Proxy(proxy_binary, [s.port for s in self.servers], os.path.join(root, "proxy.log"))
        self.firewall = Firewall()

    def _new_server(self, i):
        self.generation[i] += 1
        return Server(self.root, "node%d-%d" % (i + 1, self.generation[i]), self.aof[i], self.redis_server)

    def uris(self):
        return ["redis://127.0.0.1:%d" % p for p in self.proxy.ports]

    def replace(self, i):
        """The address of node i now reaches its standby; the old server stops."""
        old, new = self.servers[i], self.standbys[i]
        self.proxy.command(i, "target", new.port)
        self.proxy.command(i, "drop")
        old.kill()
        self.servers[i] = new
        self.standbys[i] = self._new_server(i)
        self.standbys[i].start(wipe=True)

    def close(self):
        self.firewall.heal_all()
        self.proxy.close()
        for s in self.servers + self.standbys:
            s.kill()
