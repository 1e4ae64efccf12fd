"""The cluster nemesis (scripts/chaos --clusters): failovers, resharding and
whole-member outages against cluster members, on a seeded schedule.

One worker per member draws its faults from the seed (kind, target name,
hold times) and carries each out to the end (a promotion waited for, the
killed master back as a replica, the member settled) before the next. A
fault's targets are the lock names in use whose slot it touches (a failover
touches every name its master serves). Unless the run asks for a majority,
a name is touched on at most one member at a time, counting a touched name
as touched until one guard window after the fault ended (its slot does not
vote there before); a worker whose draw would break that draws again a
little later. A fault that may lose writes (a promotion without the
master's agreement, a member down) keeps its names for two guard windows
instead: the promoted master's slot does not vote for one, and its counter
is repaired from the other members after about another (node_trust.hpp's
repair), and the token claim holds while the members that lost a slot's
writes and are not repaired yet are a minority. So which faults run, and when, depends on the seed and on how
long the earlier faults took: a seed replays the draws, not the timing.

The failover-check meta-test (meta-cluster-failover-unchecked) runs one
worker instead, whose every fault is joint: the same name's slot master
paused (or cut off) on two members at once, held past the holder's expiry,
with the stale client told to send its lock just before the end
(joint_worker).

Kinds (weights in CLUSTER_KINDS):
  kill_promote          kill -9 the master of a name's slot; its replica is
                        promoted (cluster-node-timeout); the old master is
                        restarted and rejoins as a replica (it resynchronises:
                        no node persists data)
  kill_promote_lagging  the same, with the replica cut off from the master's
                        replication stream first (an iptables rule drops the
                        master's packets on that connection) while clients
                        keep writing; the promoted replica then lacks the
                        last writes. Each logs the replication bytes lost
                        (the master's offset at the kill minus the offset the
                        replica was promoted at). Needs root.
  pause_promote         SIGSTOP the master of a name's slot past
                        cluster-node-timeout: the cluster promotes its
                        replica while it is silent; after a further hold it
                        is resumed and first runs what clients whose maps
                        still name it left in its sockets, before it hears
                        of its demotion (the stale master of issue 32: its
                        yes must not count), then rejoins as a replica
  partition_promote     iptables rules cut the master of a name's slot off
                        its cluster (its cluster bus both ways, and its
                        replica's replication link) while clients still
                        reach its data port; the cluster promotes the
                        replica; 0.2-0.8 s later the rules go and the old
                        master rejoins as a replica. What it accepted after
                        the cut is lost (its yes must not count: no replica
                        acknowledges it). Each logs the replication bytes
                        lost and what the old master answered clients once
                        its replica was promoted. Needs root.
  failover              CLUSTER FAILOVER on the replica (no write is lost)
  failover_force        CLUSTER FAILOVER FORCE (no agreement with the master)
  failover_takeover     CLUSTER FAILOVER TAKEOVER (no election either)
  reshard               the name's slot moves to another master of the
                        member while in use: SETSLOT IMPORTING/MIGRATING,
                        MIGRATE of its keys in steps, SETSLOT NODE
  cluster_down          every node of the member killed, then the member is
                        formed again, empty, on the same ports
"""

import json
import os
import random
import signal
import subprocess
import threading
import time

from clusters import name_slot

CLUSTER_KINDS = {
    # The kinds that may lose writes keep their names off the other members
    # for two windows, the others for one: the weights favour the fast ones
    # so that a 30-minute run injects over a thousand.
    "kill_promote": 3,
    "kill_promote_lagging": 3,
    "pause_promote": 3,
    "partition_promote": 3,
    "failover": 4,
    "failover_force": 1,
    "failover_takeover": 1,
    "reshard": 7,
    "cluster_down": 1,
}
FAILOVERS = ("kill_promote", "kill_promote_lagging", "pause_promote", "partition_promote", "failover",
             "failover_force", "failover_takeover")
# Kinds that need iptables (root, the harness's network namespace).
FIREWALLED = ("kill_promote_lagging", "partition_promote")
RESHARDS = ("reshard",)
# Kinds that lose no acknowledged write: a graceful failover waits for the
# replica to catch up, a migration moves the keys.
NO_LOSS = ("failover", "reshard")


class FaultFailed(Exception):
    pass


def wait_until(what, predicate, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except (OSError, RuntimeError, KeyError, IndexError, AttributeError):
            pass
        if time.monotonic() > deadline:
            raise FaultFailed("timed out waiting for " + what)
        time.sleep(0.02)


class ClusterNemesis:
    def __init__(self, clusters, log_path, names, window_ms, forge=False, majority=False, kinds=None,
                 gap=(0.05, 0.3), hold=(0.2, 0.8), firewall=False, together=False, new_holder=None,
                 joint=None):
        self.clusters = clusters
        self.log = open(log_path, "a")
        self.log_lock = threading.Lock()
        self.names = names
        self.window = window_ms / 1000.0
        self.forge = forge
        self.majority = majority
        self.kinds = dict(kinds or CLUSTER_KINDS)
        self.gap = gap
        self.hold = hold  # how long a replica lags before its master is killed, a slot migrates
        self.firewall = firewall
        if not firewall:
            for k in FIREWALLED:
                self.kinds.pop(k, None)
        # together: the workers start each fault at once (the meta-test: a
        # holder's lock then misses on every member's promoted replica).
        self.barrier = threading.Barrier(len(clusters.members)) if together else None
        # new_holder(None) -> a mark of who holds now; new_holder(mark) ->
        # whether someone else has entered a section since. Given, a lagging
        # replica's master is killed once a holder took its lock during the
        # lag (up to 4 s): the meta-test's aim, a lock lost by promotion.
        self.new_holder = new_holder
        # The meta-test also promotes the replica at once after the kill
        # (CLUSTER FAILOVER TAKEOVER), instead of after the cluster's
        # election: the holder is then nearly always still in its section.
        self.takeover_after_kill = new_holder is not None
        # joint (the failover-check meta-test): one worker, each fault a
        # pause_promote or partition_promote of the same name's slot master
        # on `members` members at once, held until `pause_s` after the stop
        # (so the old masters' copies of the holder's key have expired),
        # and `lead_s` before the end the number in the file `trigger` goes
        # up: the stale client (chaos_client --trigger) sends its lock then,
        # into the stopped masters. Given new_holder, a fault starts only
        # while someone holds the name.
        self.joint = joint
        self.triggers = 0
        self.touch_lock = threading.Lock()
        self.touched = {}  # name -> (member, until)
        self.rules = {}  # iptables rule -> the member it cuts in
        self.source_bound = set()  # nodes given a bind-source-addr by isolate()
        self.open_fault = {}  # member -> (kind, names) of its fault not healed yet
        self.stop_at = 0.0
        self.careful_pids = set()  # unused here; chaos.py sets it on every nemesis

    def record(self, op, **fields):
        fields.update({"t": time.monotonic_ns(), "w": time.time_ns(), "op": op})
        with self.log_lock:
            self.log.write(json.dumps(fields) + "\n")
            self.log.flush()

    # -- which names a fault may touch ---------------------------------------

    def claim(self, member, names):
        with self.touch_lock:
            now = time.monotonic()
            if not self.majority:
                for n in names:
                    who, until = self.touched.get(n, (member, 0.0))
                    if who != member and until > now:
                        return False
            for n in names:
                self.touched[n] = (member, float("inf"))
            return True

    def release(self, member, names, windows=1):
        with self.touch_lock:
            until = time.monotonic() + windows * self.window + 0.5
            for n in names:
                self.touched[n] = (member, until)

    def names_of(self, member, node):
        slots, _ = member.view()
        ranges = slots.get(node, [])
        return [n for n in self.names if any(a <= name_slot(n) <= b for a, b in ranges)]

    # -- the run ---------------------------------------------------------------

    def run(self, seed, start, stop_at):
        self.stop_at = stop_at
        if self.joint is not None:
            return self.joint_worker(random.Random(seed * 7919), start)
        threads = []
        for m in self.clusters.members:
            t = threading.Thread(target=self.worker, args=(m, random.Random(seed * 7919 + m.index), start),
                                 daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()

    def worker(self, member, rng, start):
        kinds, weights = list(self.kinds), [self.kinds[k] for k in self.kinds]
        # Let every client make its first acquisitions first.
        time.sleep(max(0.0, start + 2.0 + rng.uniform(0, 1.0) - time.monotonic()))
        while time.monotonic() < self.stop_at - 3.0:
            if self.barrier is not None:
                try:
                    self.barrier.wait(timeout=max(0.1, self.stop_at - 3.0 - time.monotonic()))
                except threading.BrokenBarrierError:
                    break
            kind = rng.choices(kinds, weights)[0]
            name = rng.choice(self.names)
            hold = rng.uniform(*self.hold)
            try:
                done = self.inflict(member, kind, name, hold, rng)
            except (FaultFailed, OSError, RuntimeError) as e:
                self.record("error", kind=kind, nodes=[member.index], error=str(e)[:300])
                self.recover(member)
                if member.index in self.open_fault:
                    # The fault ends with the recovery (the checker counts
                    # its names as touched until then, plus the windows).
                    k, names = self.open_fault[member.index]
                    self.heal(k, member, names, after_error=True)
                done = True
            time.sleep(rng.uniform(*self.gap) if done else 0.05)

    def inflict(self, member, kind, name, hold, rng):
        """Carries out one fault; False when its names are touched on
        another member (draw again)."""
        if kind == "cluster_down":
            names = list(self.names)
            if not self.claim(member.index, names):
                return False
            self.cluster_down(member, names, hold)
            return True
        master = member.master_of_slot(name_slot(name))
        if master is None:
            raise FaultFailed("no master serves %s's slot" % name)
        names = self.names_of(member, master)
        if not self.claim(member.index, names):
            return False
        try:
            if kind == "pause_promote":
                self.pause_promote(member, kind, master, names, hold)
            elif kind == "partition_promote":
                self.partition_promote(member, kind, master, names, hold)
            elif kind.startswith("kill_promote"):
                self.kill_promote(member, kind, master, names, hold, rng, lagging=kind.endswith("lagging"))
            elif kind.startswith("failover"):
                self.manual_failover(member, kind, master, names)
            elif kind == "reshard":
                self.reshard(member, name, master, names, hold, rng)
            else:
                raise ValueError("unknown cluster fault kind %r" % kind)
        finally:
            self.release(member.index, names, 1 if kind in NO_LOSS else 2)
        return True

    # -- the joint faults of the failover-check meta-test ----------------------

    def joint_worker(self, rng, start):
        kinds, weights = list(self.kinds), [self.kinds[k] for k in self.kinds]
        time.sleep(max(0.0, start + 2.0 + rng.uniform(0, 1.0) - time.monotonic()))
        while time.monotonic() < self.stop_at - 3.0:
            kind = rng.choices(kinds, weights)[0]
            name = rng.choice(self.names)
            members = rng.sample(self.clusters.members, self.joint["members"])
            hold = rng.uniform(*self.hold)
            if self.new_holder is not None:
                deadline = time.monotonic() + 3.0
                while not self.new_holder(None) and time.monotonic() < deadline:
                    time.sleep(0.005)
            try:
                self.inflict_joint(members, kind, name, hold)
            except (FaultFailed, OSError, RuntimeError) as e:
                self.record("error", kind=kind, nodes=[m.index for m in members], error=str(e)[:300])
                for m in members:
                    self.recover(m)
                    if m.index in self.open_fault:
                        k, names = self.open_fault[m.index]
                        self.heal(k, m, names, after_error=True)
            time.sleep(rng.uniform(*self.gap))

    def inflict_joint(self, members, kind, name, hold):
        targets = []
        for m in members:
            master = m.master_of_slot(name_slot(name))
            replica = m.replica_of(master) if master is not None else None
            if replica is None:
                self.record("skip", kind=kind, nodes=[m.index], why="no master with a live replica")
                return
            targets.append((m, master, replica, self.names_of(m, master)))
        rules = {}
        stopped_at = time.monotonic()
        try:
            for m, master, replica, names in targets:
                self.claim(m.index, names)
                self.fault(kind, m, names, master=master.label, replica=replica.label,
                           joint=[t[0].index for t in targets])
                if kind == "pause_promote":
                    master.signal(signal.SIGSTOP)
                else:
                    rules[m.index] = self.isolate(m, master)
            for m, master, replica, names in targets:
                wait_until("%s's promotion" % replica.label, lambda: replica.role() == "master",
                           10 + 4 * self.clusters.node_timeout_ms / 1000.0)
                self.record("promoted", kind=kind, nodes=[m.index], names=names, replica=replica.label)
            resume_at = max(stopped_at + self.joint["pause_s"], time.monotonic() + hold)
            time.sleep(max(0.0, resume_at - self.joint["lead_s"] - time.monotonic()))
            self.trigger()
            time.sleep(max(0.0, resume_at - time.monotonic()))
        finally:
            for m, master, replica, names in targets:
                if kind == "pause_promote":
                    master.signal(signal.SIGCONT)
                elif m.index in rules:
                    self.rejoin(master, rules[m.index])
        for m, master, replica, names in targets:
            try:
                m.wait_healthy(time.monotonic() + 20)
                self.heal(kind, m, names)
            finally:
                self.release(m.index, names, 2)

    def trigger(self):
        self.triggers += 1
        tmp = self.joint["trigger"] + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % self.triggers)
        os.replace(tmp, self.joint["trigger"])
        self.record("trigger", n=self.triggers)

    def fault(self, kind, member, names, **fields):
        self.open_fault[member.index] = (kind, names)
        self.record("fault", kind=kind, nodes=[member.index], names=names, **fields)

    def heal(self, kind, member, names, **fields):
        self.open_fault.pop(member.index, None)
        self.record("heal", kind=kind, nodes=[member.index], names=names, **fields)

    # -- the faults ------------------------------------------------------------

    def kill_promote(self, member, kind, master, names, hold, rng, lagging):
        replica = member.replica_of(master)
        if replica is None:
            self.record("skip", kind=kind, nodes=[member.index], why="the master has no live replica")
            return
        rule = None
        self.fault(kind, member, names, master=master.label, replica=replica.label)
        if lagging:
            mark = self.new_holder(None) if self.new_holder else None
            rule = self.cut_replication(member, master)
            if self.new_holder:
                deadline = time.monotonic() + 4.0
                while time.monotonic() < deadline and not self.new_holder(mark):
                    time.sleep(0.005)
            else:
                time.sleep(hold)  # clients keep writing to the master meanwhile
        sent = int(master.info("replication").get("master_repl_offset", 0))
        master.kill()
        if self.takeover_after_kill:
            replica.call("CLUSTER", "FAILOVER", "TAKEOVER")
        try:
            wait_until("%s's promotion" % replica.label, lambda: replica.role() == "master",
                       10 + 4 * self.clusters.node_timeout_ms / 1000.0)
        finally:
            if rule is not None:
                self.uncut(rule)
        repl = replica.info("replication")
        promoted_at = int(repl.get("second_repl_offset", 0)) - 1
        lost = max(0, sent - promoted_at) if promoted_at >= 0 else None
        self.record("promoted", kind=kind, nodes=[member.index], names=names, replica=replica.label,
                    lost_bytes=lost)
        if self.forge:
            self.forge_records(replica)
        time.sleep(rng.uniform(0.0, 0.3))
        master.start()  # with its nodes.conf: it rejoins as a replica
        member.wait_healthy(time.monotonic() + 20)
        self.heal(kind, member, names)

    def pause_promote(self, member, kind, master, names, hold):
        replica = member.replica_of(master)
        if replica is None:
            self.record("skip", kind=kind, nodes=[member.index], why="the master has no live replica")
            return
        self.fault(kind, member, names, master=master.label, replica=replica.label)
        master.signal(signal.SIGSTOP)
        try:
            wait_until("%s's promotion" % replica.label, lambda: replica.role() == "master",
                       10 + 4 * self.clusters.node_timeout_ms / 1000.0)
            self.record("promoted", kind=kind, nodes=[member.index], names=names, replica=replica.label)
            # Clients keep sending to the silent master meanwhile (their
            # maps name it until a command of theirs times out there).
            time.sleep(hold)
        finally:
            master.signal(signal.SIGCONT)
        member.wait_healthy(time.monotonic() + 20)
        self.heal(kind, member, names)

    def partition_promote(self, member, kind, master, names, hold):
        replica = member.replica_of(master)
        if replica is None:
            self.record("skip", kind=kind, nodes=[member.index], why="the master has no live replica")
            return
        self.fault(kind, member, names, master=master.label, replica=replica.label)
        rules = self.isolate(member, master)
        try:
            wait_until("%s's promotion" % replica.label, lambda: replica.role() == "master",
                       10 + 4 * self.clusters.node_timeout_ms / 1000.0)
            repl = replica.info("replication")
            promoted_at = int(repl.get("second_repl_offset", 0)) - 1
            self.record("promoted", kind=kind, nodes=[member.index], names=names, replica=replica.label,
                        stale_master=self.stale_answer(master))
            # Clients whose maps name the old master still reach it meanwhile.
            time.sleep(hold)
            sent = int(master.info("replication").get("master_repl_offset", 0))
            lost = max(0, sent - promoted_at) if promoted_at >= 0 else None
            self.record("stale_master", kind=kind, nodes=[member.index], names=names, lost_bytes=lost,
                        stale_master=self.stale_answer(master))
        finally:
            self.rejoin(master, rules)
        member.wait_healthy(time.monotonic() + 20)
        self.heal(kind, member, names)

    def isolate(self, member, master):
        """Cuts `master` off the other nodes of its member, not off clients:
        its cluster bus both ways (the links others opened to its bus port,
        and the ones it opened to theirs) and its replicas' replication
        links. Its data port stays open, so clients whose maps name it
        still reach it. Returns the rules, for rejoin().

        Every node listens on 127.0.0.1 and announces it
        (clusters.py), so the links the master opens are told apart by
        their source address: from now on they come from an address of
        its own (bind-source-addr), dropped both ways; the ones it had
        opened before are dropped by their ports."""
        others = [n for n in member.nodes if n is not master]
        source = "127.0.%d.%d" % (1 + member.index, 1 + member.nodes.index(master))
        r = master.call("CONFIG", "SET", "bind-source-addr", source)
        if isinstance(r, Exception):
            raise FaultFailed("CONFIG SET bind-source-addr: %s" % r)
        self.source_bound.add(master)
        rules = [["-p", "tcp", "--dport", str(master.bus_port), "-j", "DROP"],
                 ["-p", "tcp", "--sport", str(master.bus_port), "-j", "DROP"],
                 ["-s", source, "-j", "DROP"], ["-d", source, "-j", "DROP"]]
        bus_ports = {n.bus_port for n in others}
        for local, remote in self.links_of(master):
            if remote in bus_ports:
                rules.append(["-p", "tcp", "--sport", str(local), "--dport", str(remote), "-j", "DROP"])
                rules.append(["-p", "tcp", "--sport", str(remote), "--dport", str(local), "-j", "DROP"])
        for line in master.call("CLIENT", "LIST", "TYPE", "replica").decode().splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            port = fields["addr"].rsplit(":", 1)[1]
            rules.append(["-p", "tcp", "--sport", str(master.port), "--dport", port, "-j", "DROP"])
            rules.append(["-p", "tcp", "--sport", port, "--dport", str(master.port), "-j", "DROP"])
        for rule in rules:
            self.cut(member, rule)
        return rules

    @staticmethod
    def links_of(node):
        """(local port, remote port) of node's established TCP connections."""
        out = subprocess.run(["ss", "-tnpH", "state", "established"], check=True, capture_output=True,
                             text=True).stdout
        links = []
        for line in out.splitlines():
            if "pid=%d," % node.proc.pid not in line:
                continue
            f = line.split()
            links.append((int(f[2].rsplit(":", 1)[1]), int(f[3].rsplit(":", 1)[1])))
        return links

    def rejoin(self, master, rules):
        """Undoes isolate(): its own source address first, so no link it
        opens from now on needs the rules."""
        self.unbind_source(master)
        for rule in rules:
            self.uncut(rule)

    def unbind_source(self, node):
        if node in self.source_bound:
            node.call("CONFIG", "SET", "bind-source-addr", "")
            self.source_bound.discard(node)

    @staticmethod
    def stale_answer(node):
        """What the cut-off master says of itself: its role and its
        cluster_state (a master that lost sight of the majority answers
        CLUSTERDOWN)."""
        try:
            state = [line.split(":", 1)[1] for line in node.call("CLUSTER", "INFO").decode().splitlines()
                     if line.startswith("cluster_state:")]
            return "%s, cluster_state %s" % (node.role(), state[0] if state else "?")
        except (OSError, AttributeError, IndexError) as e:
            return "no answer (%s)" % e

    def cut_replication(self, member, master):
        """Drops the master's packets on the replica's replication
        connection: the master goes on sending into the void, the replica
        sees nothing (its cluster bus still works, so the failure of the
        master is seen and it is promoted)."""
        # The master has one replica: its one replica connection is the one.
        port = None
        for line in master.call("CLIENT", "LIST", "TYPE", "replica").decode().splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            port = int(fields["addr"].rsplit(":", 1)[1])
            break
        if port is None:
            raise FaultFailed("%s has no replica connection" % master.label)
        rule = ["-p", "tcp", "--sport", str(master.port), "--dport", str(port), "-j", "DROP"]
        self.cut(member, rule)
        return rule

    def cut(self, member, rule):
        subprocess.run(["iptables", "-A", "INPUT"] + rule, check=True)
        self.rules[tuple(rule)] = member.index

    def uncut(self, rule):
        subprocess.run(["iptables", "-D", "INPUT"] + list(rule), check=False)
        self.rules.pop(tuple(rule), None)

    def forge_records(self, node):
        """The meta-test's broken rule: the promoted replica's node records
        are stamped as verified for it, long ago, counters as it inherited
        them, as a member that ignored the master change would take them."""
        identity = node.identity()
        cursor = b"0"
        while True:
            cursor, keys = node.call("SCAN", cursor, "MATCH", "redsync:node:*", "COUNT", 1000)
            for k in keys:
                node.call("HSET", k, "run", identity, "since", 1)
                node.call("HDEL", k, "pending")
            if cursor == b"0":
                break
        self.record("forged", node=node.label)

    def manual_failover(self, member, kind, master, names):
        replica = member.replica_of(master)
        if replica is None:
            self.record("skip", kind=kind, nodes=[member.index], why="the master has no live replica")
            return
        option = {"failover": [], "failover_force": ["FORCE"], "failover_takeover": ["TAKEOVER"]}[kind]
        self.fault(kind, member, names, master=master.label, replica=replica.label)
        r = replica.call("CLUSTER", "FAILOVER", *option)
        if isinstance(r, Exception):
            raise FaultFailed("CLUSTER FAILOVER %s: %s" % (" ".join(option), r))
        wait_until("%s's promotion" % replica.label, lambda: replica.role() == "master", 10)
        member.wait_healthy(time.monotonic() + 20)
        self.heal(kind, member, names)

    def reshard(self, member, name, src, names, hold, rng):
        slot = name_slot(name)
        slots, _ = member.view()
        others = [m for m in slots if m is not src and m.alive()]
        if not others:
            self.record("skip", kind="reshard", nodes=[member.index], why="no other master")
            return
        dst = rng.choice(sorted(others, key=lambda n: n.label))
        self.fault("reshard", member, names, slot=slot, source=src.label, target=dst.label)
        for node, args in ((dst, ("IMPORTING", src.id)), (src, ("MIGRATING", dst.id))):
            r = node.call("CLUSTER", "SETSLOT", slot, *args)
            if isinstance(r, Exception):
                raise FaultFailed("SETSLOT %d %s: %s" % (slot, args[0], r))
        # The keys move in steps while clients keep using the name (ASK and
        # TRYAGAIN on the way).
        deadline = time.monotonic() + hold
        while True:
            keys = src.call("CLUSTER", "GETKEYSINSLOT", slot, 1 if time.monotonic() < deadline else 100)
            if isinstance(keys, Exception):
                raise FaultFailed("GETKEYSINSLOT: %s" % keys)
            if keys:
                r = src.call("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "REPLACE", "KEYS", *keys, timeout=6)
                if isinstance(r, Exception):
                    raise FaultFailed("MIGRATE: %s" % r)
            elif time.monotonic() >= deadline:
                break
            time.sleep(rng.uniform(0.01, 0.1) if time.monotonic() < deadline else 0)
        # The target first, then the source, then every other master
        # (Redis's own order: the slot is never left without an owner).
        for node in [dst, src] + [m for m in slots if m is not src and m is not dst]:
            r = node.call("CLUSTER", "SETSLOT", slot, "NODE", dst.id)
            if isinstance(r, Exception) and node in (dst, src):
                raise FaultFailed("SETSLOT %d NODE: %s" % (slot, r))
        self.heal("reshard", member, names, slot=slot)

    def cluster_down(self, member, names, hold):
        self.fault("cluster_down", member, names)
        try:
            member.kill_all()
            time.sleep(hold)
            member.form()
        finally:
            self.release(member.index, names, 2)
        self.heal("cluster_down", member, names)

    # -- after an error, and at the end ----------------------------------------

    def recover(self, member):
        """Back to a settled member after a fault that went wrong: every
        node running, and if it does not settle, the member formed again."""
        for node in [n for n in member.nodes if n in self.source_bound]:
            try:
                self.unbind_source(node)
            except OSError:
                pass
        for rule in [r for r, m in self.rules.items() if m == member.index]:
            self.uncut(rule)
        for n in member.nodes:
            if not n.alive():
                try:
                    n.start()
                except RuntimeError:
                    pass
        try:
            member.wait_healthy(time.monotonic() + 20)
            self.record("recovered", nodes=[member.index])
        except RuntimeError:
            names = list(self.names)
            self.record("fault", kind="reform", nodes=[member.index], names=names)
            member.kill_all()
            member.form()
            self.record("heal", kind="reform", nodes=[member.index], names=names)

    def heal_everything(self):
        for node in list(self.source_bound):
            try:
                self.unbind_source(node)
            except OSError:
                pass
        for rule in list(self.rules):
            self.uncut(rule)
        for m in self.clusters.members:
            for n in m.nodes:
                if not n.alive():
                    n.start()
        self.record("heal_all")
