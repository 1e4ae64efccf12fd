"""The nemesis: a fault schedule drawn from a seed, then carried out against
the cluster, every step recorded in nemesis.jsonl with monotonic times.

The schedule is fixed by the seed alone (kinds, times, durations, target
nodes); only the target of a client pause (whoever holds a lock at that
moment) is chosen when it happens. The schedule never has more than a
minority of nodes touched at once, counting a restarted, emptied or
replaced node as touched until it can vote again (one guard window later),
unless the run asks for a majority.
"""

import heapq
import json
import os
import random
import signal
import struct
import time

KINDS = {
    # kind: weight
    "kill_restart": 3,        # kill -9, restart with its data files (AOF nodes keep their keys)
    "kill_restart_late": 1,   # the same, restarted only after the guard window (delayed restart)
    "restart_empty": 3,       # kill -9, wipe the data, restart at once (data loss)
    "replace": 2,             # the address moves to a different long-running server (new run_id)
    "pause_short": 2,         # SIGSTOP one or two nodes for less than the expiry
    "pause_long": 2,          # SIGSTOP one or two nodes for longer than the expiry
    "partition": 3,           # iptables cuts the node's address off (root only)
    "slow": 2,                # the proxy adds latency and jitter
    "stall": 2,               # the proxy stops forwarding (a black hole), connections stay open
    "drop": 2,                # the proxy resets every connection
    "client_pause": 3,        # SIGSTOP the process in a critical section past the expiry
}

# Faults that leave a node unable to vote until the guard window has passed.
NEEDS_WINDOW = {"kill_restart", "kill_restart_late", "restart_empty", "replace", "restart_empty_forged"}


def make_schedule(seed, duration, nodes, expiry_ms, kinds=None, majority=False, gap=(0.4, 2.0)):
    """A list of faults [{at, kind, nodes, hold, ...}], times in seconds from
    the start of the run."""
    rng = random.Random(seed)
    kinds = kinds or KINDS
    names, weights = list(kinds), [kinds[k] for k in kinds]
    window = expiry_ms / 1000.0
    limit = nodes if majority else (nodes - 1) // 2
    busy_until = [0.0] * nodes
    schedule = []
    t = 2.0  # let every client make its first acquisition first
    end = duration - 3.0  # and leave time for the last faults to heal
    while True:
        t += rng.uniform(*gap)
        if t >= end:
            break
        kind = rng.choices(names, weights)[0]
        fault = {"at": round(t, 3), "kind": kind}
        if kind == "client_pause":
            fault["hold"] = round(rng.uniform(1.5, 2.5) * window, 3)
            schedule.append(fault)
            continue
        count = 2 if kind.startswith("pause") and rng.random() < 0.5 else 1
        if kind == "kill_restart_late":
            hold = window + rng.uniform(0.3, 1.0)
        elif kind == "pause_short":
            hold = rng.uniform(0.1, 0.6) * window
        elif kind == "pause_long":
            hold = rng.uniform(1.2, 2.0) * window
        elif kind in ("partition", "stall"):
            hold = rng.uniform(0.2, 2.0) * window
        elif kind == "slow":
            hold = rng.uniform(0.5, 2.0) * window
            fault["delay_ms"] = rng.randrange(5, 60)
            fault["jitter_ms"] = rng.randrange(0, 40)
        else:
            hold = 0.0
        busy = hold + (window + 1.0 if kind in NEEDS_WINDOW else 0.2)
        touched = sum(1 for b in busy_until if b > t)
        free = [i for i in range(nodes) if busy_until[i] <= t]
        if touched + count > limit or len(free) < count:
            continue
        targets = sorted(rng.sample(free, count))
        for i in targets:
            busy_until[i] = t + busy
        fault["nodes"] = targets
        fault["hold"] = round(hold, 3)
        schedule.append(fault)
    return schedule


class Nemesis:
    """Carries out a schedule against a Cluster; logs every step."""

    def __init__(self, cluster, log_path, resource_path, max_expiry_ms, forge=False):
        self.cluster = cluster
        self.log = open(log_path, "a")
        self.resource_path = resource_path
        self.max_expiry_ms = max_expiry_ms
        self.forge = forge
        self.counts = {}
        self.skipped = {}
        self.paused_clients = set()
        # Pids of clients that check their lock again before writing.
        self.careful_pids = set()
        self.rng = random.Random(0)

    def record(self, op, **fields):
        fields.update({"t": time.monotonic_ns(), "w": time.time_ns(), "op": op})
        self.log.write(json.dumps(fields) + "\n")
        self.log.flush()

    def run(self, schedule, start, stop_at, seed=0):
        """Runs until every fault is done and healed, or stop_at (monotonic s)."""
        self.rng = random.Random(seed)
        pending = [(start + f["at"], i, "fault", f) for i, f in enumerate(schedule)]
        heapq.heapify(pending)
        seq = len(schedule)
        while pending:
            at, _, what, item = heapq.heappop(pending)
            now = time.monotonic()
            if at > stop_at:
                if what == "fault":
                    continue
                at = now
            if at > now:
                time.sleep(at - now)
            if what == "fault":
                heal = self.inflict(item)
                if heal is not None:
                    seq += 1
                    heapq.heappush(pending, (time.monotonic() + item["hold"], seq, "heal", heal))
            else:
                item()

    def inflict(self, f):
        kind, nodes = f["kind"], f.get("nodes", [])
        c = self.cluster
        if kind == "partition" and not c.firewall.available:
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
            self.record("skip", kind=kind, nodes=nodes, why="partitions need root (a network namespace)")
            return None
        if kind == "client_pause":
            return self.pause_client(f)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.record("fault", kind=kind, nodes=nodes, hold=f.get("hold", 0))
        if kind in ("kill_restart", "kill_restart_late"):
            for i in nodes:
                c.servers[i].kill()
            return lambda: self.restart(kind, nodes, wipe=False)
        if kind == "restart_empty":
            for i in nodes:
                c.servers[i].kill()
            self.restart(kind, nodes, wipe=True)
            return None
        if kind == "replace":
            for i in nodes:
                c.replace(i)
            self.record("heal", kind=kind, nodes=nodes)
            return None
        if kind.startswith("pause"):
            for i in nodes:
                c.servers[i].signal(signal.SIGSTOP)
            return lambda: self.resume_nodes(kind, nodes)
        if kind == "partition":
            for i in nodes:
                c.firewall.cut(c.proxy.ports[i])
            return lambda: self.heal_partition(nodes)
        if kind == "slow":
            for i in nodes:
                c.proxy.command(i, "delay", f["delay_ms"], f["jitter_ms"])
            return lambda: self.proxy_normal(kind, nodes)
        if kind == "stall":
            for i in nodes:
                c.proxy.command(i, "stall")
            return lambda: self.proxy_normal(kind, nodes)
        if kind == "drop":
            for i in nodes:
                c.proxy.command(i, "drop")
            self.record("heal", kind=kind, nodes=nodes)
            return None
        raise ValueError("unknown fault kind %r" % kind)

    def restart(self, kind, nodes, wipe):
        for i in nodes:
            server = self.cluster.servers[i]
            server.start(wipe=wipe)
            if self.forge:
                self.forge_record(server)
        self.record("heal", kind=kind, nodes=nodes)

    def forge_record(self, server):
        """The meta-test's broken guard: stamps the emptied node's record as
        verified long ago with a fresh counter, as a guard that trusted any
        node at once would."""
        from cluster import redis_call
        identity = server.run_id() + ":" + server.master_replid()
        redis_call(server.port, "HSET", "redsync:node", "run", identity, "since", 1, "fence", 0)
        redis_call(server.port, "HDEL", "redsync:node", "pending")

    def resume_nodes(self, kind, nodes):
        for i in nodes:
            self.cluster.servers[i].signal(signal.SIGCONT)
        self.record("heal", kind=kind, nodes=nodes)

    def heal_partition(self, nodes):
        for i in nodes:
            self.cluster.firewall.heal(self.cluster.proxy.ports[i])
        self.record("heal", kind="partition", nodes=nodes)

    def proxy_normal(self, kind, nodes):
        for i in nodes:
            self.cluster.proxy.command(i, "normal")
        self.record("heal", kind=kind, nodes=nodes)

    def holders(self):
        """Pids in a critical section now, from the resource's occupant markers."""
        with open(self.resource_path, "rb") as f:
            data = f.read()
        slots = struct.unpack_from("<Q", data, 8)[0]
        pids = []
        for s in range(slots):
            occupant = struct.unpack_from("<Q", data, 64 + 64 * s)[0]
            if occupant:
                pids.append(occupant >> 32)
        return pids

    def pause_client(self, f):
        """Stops a process that is inside a critical section now. Holders that
        re-check their lock before writing (auto-extension) are nearly always
        inside one, so the others are preferred for a second: they write
        without looking again, which is what fencing is for."""
        deadline = time.monotonic() + 1.0
        careful = None
        pid = None
        while time.monotonic() < deadline:
            pids = [p for p in self.holders() if p not in self.paused_clients]
            careless = [p for p in pids if p not in self.careful_pids]
            if careless:
                pid = self.rng.choice(careless)
                break
            if pids:
                careful = self.rng.choice(pids)
            time.sleep(0.001)
        pid = pid or careful
        if pid is None:
            self.skipped["client_pause"] = self.skipped.get("client_pause", 0) + 1
            self.record("skip", kind="client_pause", why="nobody held a lock")
            return None
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            self.skipped["client_pause"] = self.skipped.get("client_pause", 0) + 1
            self.record("skip", kind="client_pause", why="the holder exited")
            return None
        self.counts["client_pause"] = self.counts.get("client_pause", 0) + 1
        self.record("fault", kind="client_pause", pid=pid, hold=f["hold"])
        self.paused_clients.add(pid)

        def resume():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.paused_clients.discard(pid)
            self.record("heal", kind="client_pause", pid=pid)
        return resume

    def heal_everything(self):
        for pid in list(self.paused_clients):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.cluster.firewall.heal_all()
        for i, s in enumerate(self.cluster.servers):
            if s.proc is None:
                s.start()
            s.signal(signal.SIGCONT)
            self.cluster.proxy.command(i, "normal")
        self.record("heal_all")
