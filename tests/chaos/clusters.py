"""The harness's cluster members (scripts/chaos --clusters): N members, each
a real local Redis Cluster of `masters` masters with one replica each.

A cluster node announces its own port in the slot map, so no proxy can sit in
front of it: clients reach the nodes directly, and the nemesis acts on the
processes (kill -9, restart) and on the clusters' own commands (CLUSTER
FAILOVER, SETSLOT, MIGRATE). Every node keeps its port and bus port for the
whole run, so the seeds in the clients' URIs stay valid, and its
nodes.conf across restarts, so a killed master comes back as a replica of
the node promoted in its place. No node persists data: a restarted node
resynchronises from its master, and a member brought back after
`cluster_down` starts empty.

A cluster is formed as tests/support/redis_cluster.cpp forms one (no
`redis-cli --cluster create`, which sleeps a second per step):
SET-CONFIG-EPOCH, ADDSLOTSRANGE, MEET, REPLICATE, then a polling wait for
cluster_state:ok everywhere and every replica's link up.
"""

import os
import random
import shutil
import socket
import subprocess
import time

from cluster import kill_process, redis_call

SLOTS = 16384
_taken = set()


def pick_port():
    """A free port below the usual ephemeral range (32768-60999): a port of
    the ephemeral range may be taken by an outgoing connection between its
    choice and a restart of its node, and a node keeps its ports all run."""
    while True:
        port = random.randrange(20000, 32000)
        if port in _taken:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        _taken.add(port)
        return port


def crc16(data):
    """CRC16-CCITT (XMODEM), Redis Cluster's key hash."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def name_slot(name):
    """The slot of a lock name on a cluster member: its keys are `{NAME}`
    (docs/cluster.md), so the slot is that of the name itself (for a name
    without braces, which is all the harness uses)."""
    return crc16(name.encode()) % SLOTS


def check(reply, what):
    if isinstance(reply, Exception):
        raise RuntimeError("%s: %s" % (what, reply))
    return reply


class Node:
    """One cluster-enabled redis-server with a fixed port and bus port."""

    def __init__(self, root, label, redis_server, node_timeout_ms):
        self.label = label
        self.dir = os.path.join(root, label)
        self.port = pick_port()
        self.bus_port = pick_port()
        self.redis_server = redis_server
        self.node_timeout_ms = node_timeout_ms
        self.proc = None
        self.id = None

    def start(self, wipe=False):
        if wipe and os.path.isdir(self.dir):
            for f in os.listdir(self.dir):  # the log stays, for the run folder
                if f != "redis.log":
                    path = os.path.join(self.dir, f)
                    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        os.makedirs(self.dir, exist_ok=True)
        args = [self.redis_server, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                "--logfile", "redis.log", "--save", "", "--appendonly", "no",
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-port", str(self.bus_port), "--cluster-node-timeout", str(self.node_timeout_ms),
                # The address it announces, whatever address its links come
                # from (partition_promote gives a node links of its own).
                "--cluster-announce-ip", "127.0.0.1",
                # A replica cut off from its master for a while may still be
                # promoted: the lagging failover needs exactly that.
                "--cluster-replica-validity-factor", "0",
                # A shard without a master does not stop the member's other slots.
                "--cluster-require-full-coverage", "no",
                "--cluster-allow-replica-migration", "no",
                # A replica's first full synchronisation starts at once.
                "--repl-diskless-sync-delay", "0"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                # Our process, not another server that holds the port.
                if self.proc.poll() is None and "process_id:%d\r\n" % self.proc.pid in redis_call(
                        self.port, "INFO", "server", timeout=0.5).decode():
                    self.id = redis_call(self.port, "CLUSTER", "MYID").decode()
                    return
            except (OSError, AttributeError):
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("%s did not start on port %d; see %s/redis.log" % (self.label, self.port, self.dir))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)

    def kill(self):
        if self.proc is not None:
            kill_process(self.proc)
            self.proc = None

    def call(self, *args, timeout=1.0):
        return redis_call(self.port, *args, timeout=timeout)

    def info(self, section):
        text = self.call("INFO", section)
        if isinstance(text, Exception):
            raise OSError(str(text))
        out = {}
        for line in text.decode().splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v.strip()
        return out

    def role(self):
        return self.info("replication").get("role")

    def identity(self):
        """The identity the library reads for this server
        (lib/redlock/trust/node_identity.cpp): run_id, master_replid, and the last
        RDB load's key counts once a load happened."""
        server, repl, pers = self.info("server"), self.info("replication"), self.info("persistence")
        out = server["run_id"]
        if repl.get("master_replid"):
            out += ":" + repl["master_replid"]
        loaded = pers.get("rdb_last_load_keys_loaded", "")
        expired = pers.get("rdb_last_load_keys_expired", "")
        if (loaded and loaded != "0") or (expired and expired != "0"):
            out += ":load=%s/%s" % (loaded, expired)
        return out


class Member:
    """One cluster member: `masters` masters with equal slot ranges, one
    replica each."""

    def __init__(self, root, index, masters, redis_server, node_timeout_ms):
        self.index = index
        self.masters = masters
        self.nodes = [Node(root, "m%d-node%d" % (index + 1, k + 1), redis_server, node_timeout_ms)
                      for k in range(2 * masters)]
        self.generation = 0

    def seeds_uri(self):
        # Three seeds: one dead seed does not keep a client from starting.
        return "redis+cluster://" + ",".join("127.0.0.1:%d" % n.port for n in self.nodes[:3])

    def form(self):
        """Starts every node empty and forms the cluster; returns once every
        node sees cluster_state:ok and the same map, and every replica's
        link is up."""
        self.generation += 1
        for n in self.nodes:
            n.start(wipe=True)
        m = self.masters
        for k in range(m):
            first, last = k * SLOTS // m, (k + 1) * SLOTS // m - 1
            check(self.nodes[k].call("CLUSTER", "SET-CONFIG-EPOCH", k + 1), "SET-CONFIG-EPOCH")
            check(self.nodes[k].call("CLUSTER", "ADDSLOTSRANGE", first, last), "ADDSLOTSRANGE")
        for n in self.nodes[1:]:
            check(n.call("CLUSTER", "MEET", "127.0.0.1", self.nodes[0].port, self.nodes[0].bus_port), "MEET")
        deadline = time.monotonic() + 20
        pending = list(range(m, 2 * m))
        while pending:
            if time.monotonic() > deadline:
                raise RuntimeError("member %d: replicas could not REPLICATE" % (self.index + 1))
            k = pending[0]
            r = self.nodes[k].call("CLUSTER", "REPLICATE", self.nodes[k - m].id)
            if isinstance(r, Exception):
                time.sleep(0.05)  # the master is not in this node's table yet
                continue
            pending.pop(0)
        self.wait_healthy(deadline)
        self.wait_replicas_online(deadline)

    def wait_replicas_online(self, deadline):
        """Until every node's CLUSTER SHARDS calls every replica "online",
        as tests/support/redis_cluster.cpp waits. A node says "loading" of
        a replica until gossip brought it a replication offset above 0,
        which on an unused shard takes until the master's first replication
        PING (10 s): one write per shard brings it at once. A client whose
        first map said "loading" counts no replica for the failover check
        until it reads the map again, which an idle client does only when
        it sends again (docs/chaos.md, meta-cluster-failover-unchecked)."""
        for k in range(self.masters):
            first, last = k * SLOTS // self.masters, (k + 1) * SLOTS // self.masters - 1
            key = next("chaos-formed-%d" % i for i in range(100000)
                       if first <= name_slot("chaos-formed-%d" % i) <= last)
            check(self.nodes[k].call("SET", key, self.generation), "SET " + key)
        while True:
            if all(self.online_replicas(n) == self.masters for n in self.nodes):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("member %d: a node never saw every replica online" % (self.index + 1))
            time.sleep(0.05)

    @staticmethod
    def online_replicas(node):
        n = 0
        for shard in check(node.call("CLUSTER", "SHARDS"), "CLUSTER SHARDS"):
            fields = dict(zip(shard[::2], shard[1::2]))
            for entry in fields.get(b"nodes", []):
                f = dict(zip(entry[::2], entry[1::2]))
                n += f.get(b"role") == b"replica" and f.get(b"health") == b"online"
        return n

    def wait_healthy(self, deadline):
        while True:
            try:
                if self.healthy():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("member %d did not settle" % (self.index + 1))
            time.sleep(0.05)

    def healthy(self):
        """Every node up with cluster_state:ok and one map, every slot
        served, every replica's link up."""
        maps = set()
        for n in self.nodes:
            if not n.alive():
                return False
            if b"cluster_state:ok" not in n.call("CLUSTER", "INFO"):
                return False
            maps.add(tuple(sorted(self.masters_of(n))))
            if n.role() == "slave" and n.info("replication").get("master_link_status") != "up":
                return False
        return len(maps) == 1 and sum(len(r) for r in maps.pop()) > 0

    @staticmethod
    def masters_of(node):
        """node's view: [(master id, first slot, last slot)] from CLUSTER SLOTS."""
        out = []
        for entry in check(node.call("CLUSTER", "SLOTS"), "CLUSTER SLOTS"):
            out.append((entry[2][2].decode(), entry[0], entry[1]))
        return out

    def by_id(self, node_id):
        for n in self.nodes:
            if n.id == node_id:
                return n
        return None

    def view(self):
        """The map as the first answering live node sees it: {master Node:
        [(first, last)]}, and {master id: [replica Node]} from CLUSTER NODES."""
        for n in self.nodes:
            if not n.alive():
                continue
            try:
                slots = {}
                for mid, a, b in self.masters_of(n):
                    m = self.by_id(mid)
                    if m is not None:
                        slots.setdefault(m, []).append((a, b))
                replicas = {}
                for line in check(n.call("CLUSTER", "NODES"), "CLUSTER NODES").decode().splitlines():
                    f = line.split()
                    if "slave" in f[2] and "fail" not in f[2] and f[3] != "-":
                        r = self.by_id(f[0])
                        if r is not None and r.alive():
                            replicas.setdefault(f[3], []).append(r)
                return slots, replicas
            except (OSError, RuntimeError, IndexError):
                continue
        return {}, {}

    def master_of_slot(self, slot):
        slots, _ = self.view()
        for m, ranges in slots.items():
            if any(a <= slot <= b for a, b in ranges):
                return m
        return None

    def replica_of(self, master):
        _, replicas = self.view()
        rs = replicas.get(master.id, [])
        return rs[0] if rs else None

    def kill_all(self):
        for n in self.nodes:
            n.kill()


class Clusters:
    """The N cluster members of a run."""

    def __init__(self, root, members, masters, redis_server, node_timeout_ms):
        self.root = root
        self.node_timeout_ms = node_timeout_ms
        self.members = [Member(root, i, masters, redis_server, node_timeout_ms) for i in range(members)]
        try:
            for m in self.members:
                m.form()
        except BaseException:
            self.close()  # no server outlives a run that could not start
            raise

    def uris(self):
        return [m.seeds_uri() for m in self.members]

    def close(self):
        for m in self.members:
            m.kill_all()
