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
    "flush": 1,               # FLUSHALL: the data is gone, the server (run_id) is the same
    "client_pause": 3,        # SIGSTOP the process in a critical section past the expiry
    # Two nodes stopped while locks are taken on the other three, then, once
    # they are back, one of those three loses its data (restart empty or
    # replacement): the case where a single node's loss decides the quorum.
    "split_then_loss": 3,
}

# Kinds only some runs ask for (make_schedule's `kinds`), kept out of KINDS
# so that a seed's main schedule stays what it was:
#   refuse: the proxy resets every connection and refuses new ones until the
#   heal, so nothing sent meanwhile ever reaches the node (a stall or a
#   pause delivers it late). The semaphore meta-test uses it to give holders
#   different majorities.
EXTRA_KINDS = ("refuse",)

# Faults that leave a node unable to vote until the guard window has passed.
NEEDS_WINDOW = {"kill_restart", "kill_restart_late", "restart_empty", "replace", "flush"}


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
        if kind == "split_then_loss":
            hold = rng.uniform(0.3, 0.8) * window
            # It needs every node: wait for the earlier faults to be over.
            t = max([t] + busy_until)
            if t >= end:
                break
            fault["at"] = round(t, 3)
            nodes_all = list(range(nodes))
            rng.shuffle(nodes_all)
            fault["nodes"] = sorted(nodes_all[:2])
            fault["loss_node"] = nodes_all[2]
            fault["loss"] = rng.choice(["restart_empty", "replace"])
            fault["hold"] = round(hold, 3)
            for i in fault["nodes"]:
                busy_until[i] = t + hold + 0.2
            busy_until[fault["loss_node"]] = t + hold + window + 1.0
            schedule.append(fault)
            continue
        if kind == "kill_restart_late":
            hold = window + rng.uniform(0.3, 1.0)
        elif kind == "pause_short":
            hold = rng.uniform(0.1, 0.6) * window
        elif kind == "pause_long":
            hold = rng.uniform(1.2, 2.0) * window
        elif kind == "refuse":
            # Short, so that which nodes answer changes often.
            hold = rng.uniform(0.3, 1.0)
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

    def __init__(self, cluster, log_path, resource_path, max_expiry_ms, forge=False, majority=False):
        self.cluster = cluster
        self.log = open(log_path, "a")
        self.resource_path = resource_path
        self.max_expiry_ms = max_expiry_ms
        self.forge = forge
        self.counts = {}
        self.skipped = {}
        self.paused_clients = set()
        self.majority = majority
        self.touched_until = {}
        # Pids of clients that check their lock again before writing.
        self.careful_pids = set()
        self.rng = random.Random(0)

    def record(self, op, **fields):
        fields.update({"t": time.monotonic_ns(), "w": time.time_ns(), "op": op})
        self.log.write(json.dumps(fields) + "\n")
        self.log.flush()

    def run(self, schedule, start, stop_at, seed=0):
        """Runs until every fault is done and healed, or stop_at (monotonic s).
        A fault's heal is due at its scheduled time plus its hold, whatever
        time the fault itself took."""
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
                if heal == "retry":
                    # A client pause found nobody in a critical section: look
                    # again shortly, for up to a second.
                    item.setdefault("first_try", at)
                    if at - item["first_try"] < 1.0:
                        seq += 1
                        heapq.heappush(pending, (at + 0.003, seq, "fault", item))
                    else:
                        self.note_skip("client_pause", "nobody held a lock for a second")
                elif heal is not None:
                    seq += 1
                    heapq.heappush(pending, (max(at, item.get("first_try", at)) + item["hold"], seq, "heal", heal))
            else:
                item()

    def note_skip(self, kind, why, **fields):
        self.skipped[kind] = self.skipped.get(kind, 0) + 1
        self.record("skip", kind=kind, why=why, **fields)

    def touched_now(self):
        """Nodes faulted at this moment: down, stopped, cut off or behind a
        slowed or stalled proxy, or restarted, emptied or replaced less than
        one expiry ago."""
        return {i for i, until in self.touched_until.items() if until > time.monotonic()}

    def inflict(self, f):
        kind, nodes = f["kind"], f.get("nodes", [])
        c = self.cluster
        if kind == "partition" and not c.firewall.available:
            self.note_skip(kind, "partitions need root (a network namespace)", nodes=nodes)
            return None
        if kind == "client_pause":
            return self.pause_client(f)
        touched = self.touched_now()
        if not self.majority and len(touched | set(nodes)) > (len(c.servers) - 1) // 2:
            self.note_skip(kind, "would touch a majority at once", nodes=nodes, touched=sorted(touched))
            return None
        span = f.get("hold", 0) + (self.max_expiry_ms / 1000.0 + 0.5 if kind in NEEDS_WINDOW else 0.1)
        for i in nodes:
            self.touched_until[i] = time.monotonic() + span
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
        if kind == "split_then_loss":
            for i in nodes:
                c.servers[i].signal(signal.SIGSTOP)
            return lambda: self.split_healed_then_loss(f)
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
        if kind == "refuse":
            for i in nodes:
                c.proxy.command(i, "refuse", "on")
                c.proxy.command(i, "drop")
            return lambda: self.proxy_accept(nodes)
        if kind == "flush":
            from cluster import redis_call
            for i in nodes:
                redis_call(c.servers[i].port, "FLUSHALL")
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

    def healed(self, nodes):
        for i in nodes:
            self.touched_until[i] = time.monotonic()

    def resume_nodes(self, kind, nodes):
        self.healed(nodes)
        for i in nodes:
            self.cluster.servers[i].signal(signal.SIGCONT)
        self.record("heal", kind=kind, nodes=nodes)

    def split_healed_then_loss(self, f):
        self.resume_nodes(f["kind"], f["nodes"])
        time.sleep(0.05)
        i = f["loss_node"]
        kind = f["kind"] + ":" + f["loss"]
        if not self.majority and len(self.touched_now() | {i}) > (len(self.cluster.servers) - 1) // 2:
            self.note_skip(kind, "would touch a majority at once", nodes=[i])
            return
        self.touched_until[i] = time.monotonic() + self.max_expiry_ms / 1000.0 + 0.5
        self.record("fault", kind=kind, nodes=[i])
        if f["loss"] == "replace":
            self.cluster.replace(i)
        else:
            self.cluster.servers[i].kill()
            self.cluster.servers[i].start(wipe=True)
        self.record("heal", kind=kind, nodes=[i])

    def heal_partition(self, nodes):
        self.healed(nodes)
        for i in nodes:
            self.cluster.firewall.heal(self.cluster.proxy.ports[i])
        self.record("heal", kind="partition", nodes=nodes)

    def proxy_normal(self, kind, nodes):
        self.healed(nodes)
        for i in nodes:
            self.cluster.proxy.command(i, "normal")
        self.record("heal", kind=kind, nodes=nodes)

    def proxy_accept(self, nodes):
        self.healed(nodes)
        for i in nodes:
            self.cluster.proxy.command(i, "refuse", "off")
        self.record("heal", kind="refuse", nodes=nodes)

    def holders(self):
        """Pids in a critical section now, from the resource's occupant pids."""
        with open(self.resource_path, "rb") as f:
            data = f.read()
        slots = struct.unpack_from("<Q", data, 8)[0]
        pids = []
        for s in range(slots):
            occupant, _, pid = struct.unpack_from("<QQQ", data, 64 + 64 * s)
            if occupant and pid:
                pids.append(pid)
        return pids

    @staticmethod
    def command_line(pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return f.read().split(b"\0")
        except OSError:
            return []

    @staticmethod
    def parent(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return 0

    def pause_client(self, f):
        """Stops a holder in a critical section now, past the expiry. Holders
        that re-check their lock before writing (auto-extension) are nearly
        always inside one, so the others are preferred: they write without
        looking again, which is what fencing is for. For a command run by
        `redsync lock`, the tool itself (the process that extends the lock)
        is stopped half the time, the command the other half."""
        pids = [p for p in self.holders() if p not in self.paused_clients]
        careless = [p for p in pids if p not in self.careful_pids]
        if not pids or (not careless and f.get("first_try") is not None and
                        time.monotonic() - f["first_try"] < 0.5):
            return "retry"
        pid = self.rng.choice(careless or pids)
        argv = self.command_line(pid)
        if not any(a.endswith(b"chaos_client") for a in argv[:1]):
            self.note_skip("client_pause", "the holder's pid is no longer a chaos client", pid=pid)
            return None
        role = "client"
        if argv[1:2] == [b"touch"] and self.rng.random() < 0.5:
            tool = self.parent(self.parent(pid))
            if tool and any(a.endswith(b"redsync") for a in self.command_line(tool)[:1]):
                pid, role = tool, "redsync-tool"
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            self.note_skip("client_pause", "the holder exited", pid=pid)
            return None
        self.counts["client_pause"] = self.counts.get("client_pause", 0) + 1
        self.record("fault", kind="client_pause", pid=pid, role=role, hold=f["hold"])
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
            self.cluster.proxy.command(i, "refuse", "off")
        self.record("heal_all")
