"""The checker: reads a run's recorded history and reports what it shows.

Inputs (in the run folder): history/*.jsonl (the library clients and the
commands run by `redsync lock`), cli-runs.jsonl (each `redsync lock`
invocation), clients.jsonl (how each client process ended), nemesis.jsonl,
and the resource file's final state. All times are CLOCK_MONOTONIC
nanoseconds, the same clock in every process. Events are grouped by the
random process id ("proc") each history line carries, never by pid (pids are
reused within a long run).

A *grant* is a successful acquisition: for a library client, from the return
of `lock` (or of a semaphore's `acquire`) to the earlier of its `until` (the latest one it saw, as
auto-extension moves it) and the start of its `unlock` (`release`); for a command run by
`redsync lock`, from the command's start to its leaving the critical
section, or to its last record if it was killed (the tool extends the lock
while the command runs and kills it when the lock is lost).

Violations (each must be 0):
- two_holders: a grant of a name begins inside another grant of the same
  name. A client pause does not excuse it: a pause does not shorten a lock's
  validity, and a stopped `redsync lock` tool does not either, since its
  supervisor ends the command before the validity it was last given ends.
- token_not_increasing: a grant whose token is not above the token of every
  grant of its name that had begun before its lock call started, or had
  ended before it was granted (a token beyond the resource's 32 bits counts
  too).
- stale_write_accepted: the resource accepted a write although a higher token
  had touched it since (possible only with fencing off: the meta-test).
- lost_update: an accepted write overwrote another's increment, or the final
  counter differs from the accepted writes (allowing for writers killed
  between the write and its record).
- unbounded_call: `lock` returned later than its deadline plus one per-node
  command timeout plus slack, or `unlock` later than one command timeout plus
  slack (unless the nemesis stopped that process meanwhile); a `redsync lock`
  that took longer than --wait plus slack to start its command or give up.
- unfinished_call: a call that began and never returned.
- process_failed: a client that exited with an error, or a `redsync lock`
  that exited with a status other than the command's 0, 69, 75 or 79.
- liveness: a library lock call that failed although, for its whole
  duration, a quorum of nodes was reachable and voting (no fault touched
  them, counting a restarted, emptied or replaced node as not voting for
  two guard windows after its restart, and every node so after the run's
  start), its own process was not stopped,
  and no holder of that name was stopped or gone (a grant that ended
  without an unlock, a command that was killed) - unless it was contention
  within its bound: the lock was held by others for the whole call except
  for hand-over gaps no longer than the caller's claim window plus its
  longest retry delay plus slack, and no more than OVERTAKE_ALLOWANCE calls
  that began after it were granted while it waited (the fair line serves
  arrivals in order). Each violation's example says which: "idle" (the lock
  was free for longer than a hand-over while the call waited) or
  "overtaken".

For each counting semaphore of the run (run.json "semaphores": name -> k;
its sections use the resource's slot "<name>/<permit slot>", so the
resource checks fencing, overlaps and lost updates per permit slot):
- more_than_k_holders: a grant of the semaphore begins while k others are
  live (with slots in 0..k-1 this also shows as slot_two_holders).
- slot_two_holders: a grant begins inside another live grant of the same
  permit slot.
- slot_token_not_increasing: token_not_increasing's rule among the grants
  of one permit slot (tokens of different slots are not ordered).
- semaphore_liveness: a failed acquisition, unless, for its whole duration,
  fewer than the client's quorum of nodes (its "start" record; 4 of 5 for
  k = 2) were untouched by faults, counting a fault as reaching one
  semaphore expiry past its heal (a permit granted by an attempt whose undo
  never reached the node stays there that long) and the restart kinds' two
  guard windows as for liveness; or its own process was stopped; or a
  holder of the semaphore was stopped or gone; or others held all k
  permits for the whole call but for stretches no longer than one command
  timeout plus two of the longest retry delays (a waiter that collided with
  another undoes and retries) plus slack. A semaphore has no waiting line,
  so being overtaken is no violation. The example says "idle".

For each read-write lock of the run (run.json "rw_names"; its clients'
"lock" records carry "role": "reader" or "writer", and a grant is as for a
library client above, on the validity the client believed):
- reader_with_writer: a reader's grant and a writer's grant of the name
  overlap (one begins inside the other).
- two_writers: a writer's grant begins inside another writer's.
- rw_token_not_increasing: token_not_increasing's rule with readers in it:
  a writer's token must exceed every grant's (reader or writer) that had
  begun before its lock call started or had ended before it was granted,
  and a reader's token every such writer's; so writers' tokens increase in
  grant order and a reader's lies between the writers' around it. Readers'
  tokens are not ordered among themselves.
- rw_liveness: liveness's rule for a failed reader or writer call, where
  what holds the name against it is, for a writer, every other grant of the
  name, and for a reader, the writers' grants and the lock calls of writers
  that arrived before it (waiting ahead of it in the fair line, they keep
  it out) until they return; other readers never do.

Liveness is also reported per fault kind: of the library lock calls that
overlapped a fault of that kind ("none": no fault at all), how many
acquired, how many failed with an excuse (and which), and how many were
violations; the same for semaphore acquisitions.
"""

import glob
import json
import os
import struct

SLACK_NS = 300_000_000  # scheduling slack on a loaded 2-core machine
CLI_OK_STATUS = {0, 69, 75, 79}
KINDS = ("two_holders", "token_not_increasing", "stale_write_accepted", "lost_update", "unbounded_call",
         "unfinished_call", "process_failed", "liveness", "more_than_k_holders", "slot_two_holders",
         "slot_token_not_increasing", "semaphore_liveness", "reader_with_writer", "two_writers",
         "rw_token_not_increasing", "rw_liveness")
NODES = 5
# Faults after which a node does not vote until the restart guard has seen
# it for a window (and its counter is repaired, one more window).
NEEDS_WINDOW = ("kill_restart", "kill_restart_late", "restart_empty", "replace", "flush", "split_then_loss:",
                "cluster_start",
                # Cluster members (cluster_nemesis.py): a slot whose master
                # changed or that moved does not vote for a guard window.
                "kill_promote", "pause_promote", "partition_promote", "failover", "reshard", "cluster_down",
                "reform")
# The library's default retry delay is uniform in [50, 250) ms: a waiter
# whose wake-up was lost tries again within this.
MAX_RETRY_DELAY_NS = 250_000_000
# The claim window is the command timeout plus this (README, Fair hand-over).
CLAIM_EXTRA_NS = 250_000_000
# Later arrivals that may be granted while a call waits (a newcomer may take
# a lock that fell free by expiry; see the README's limits of the line).
OVERTAKE_ALLOWANCE = 2
DEFAULT_GUARD_WINDOW_NS = 3_000_000_000


def load_lines(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    out.append({"op": "garbled", "line": line[:200]})
    return out


def read_resource(path, names):
    with open(path, "rb") as f:
        data = f.read()
    slots = struct.unpack_from("<Q", data, 8)[0]
    enforce = struct.unpack_from("<Q", data, 16)[0] != 0
    state = {}
    for s in range(min(slots, len(names))):
        occupant, packed = struct.unpack_from("<QQ", data, 64 + 64 * s)
        state[names[s]] = {"occupant": occupant, "highest": packed >> 32, "counter": packed & 0xFFFFFFFF}
    return enforce, state


class Pauses:
    """When each process was stopped by the nemesis (by pid, with times)."""

    def __init__(self, nemesis):
        self.by_pid = {}
        open_at = {}
        for e in nemesis:
            if e.get("kind") != "client_pause" or "pid" not in e:
                continue
            if e["op"] == "fault":
                open_at[e["pid"]] = e["t"]
            elif e["op"] == "heal" and e["pid"] in open_at:
                self.by_pid.setdefault(e["pid"], []).append((open_at.pop(e["pid"]), e["t"]))
        for pid, t in open_at.items():
            self.by_pid.setdefault(pid, []).append((t, float("inf")))

    def paused_within(self, pids, start, end):
        for pid in pids:
            for a, b in self.by_pid.get(pid, []):
                if a <= end and b >= start:
                    return True
        return False


class NodeFaults:
    """When each node could not be counted on to vote: from a fault on it to
    its heal plus slack, or plus two guard windows (the guard, then the
    repair) for a fault that restarts, empties or replaces it. Also which
    fault kinds were active when, for the per-kind liveness report. A fault
    on a cluster member names the lock names whose slots it touched
    ("names"); it counts only for those names."""

    def __init__(self, nemesis, guard_window_ns, nodes=NODES):
        self.nodes = nodes
        self.healed = {}  # node -> [(from, healed, names or None)], the heal as logged (plus the guard windows)
        self.active = []  # (from, to, kind), nodes and client pauses
        open_at = {}
        for e in nemesis:
            if e["op"] == "start":
                # Every node is brand-new: the guard keeps it out as after a restart.
                for n in range(nodes):
                    self.close(n, "cluster_start", e["t"], e["t"], guard_window_ns)
                continue
            kind = e.get("kind")
            if not kind or e["op"] not in ("fault", "heal"):
                continue
            if kind == "client_pause":
                if e["op"] == "fault":
                    open_at[("pause", e.get("pid"))] = e["t"]
                elif ("pause", e.get("pid")) in open_at:
                    self.active.append((open_at.pop(("pause", e.get("pid"))), e["t"], kind))
                continue
            names = tuple(e["names"]) if "names" in e else None
            for n in e.get("nodes", []):
                if e["op"] == "fault":
                    open_at[(kind, n)] = (e["t"], names)
                elif (kind, n) in open_at:
                    t, names = open_at.pop((kind, n))
                    self.close(n, kind, t, e["t"], guard_window_ns, names)
        for (kind, n), t in open_at.items():
            if kind == "pause":
                self.active.append((t, float("inf"), "client_pause"))
            else:
                self.close(n, kind, t[0], float("inf"), guard_window_ns, t[1])

    def close(self, node, kind, start, healed, window, names=None):
        extra = 2 * window if kind.startswith(NEEDS_WINDOW) else 0
        self.healed.setdefault(node, []).append((start, healed + extra, names))
        self.active.append((start, healed + extra, kind.split(":")[0]))

    def voting_throughout(self, start, end, after_heal=0, name=None):
        """Nodes that no fault touched during [start, end], a fault reaching
        `after_heal` ns further than its heal (plus slack); for `name`, a
        fault that names other names does not count."""
        return sum(1 for n in range(self.nodes)
                   if not any(a <= end and b + after_heal + SLACK_NS >= start and (ns is None or name in ns)
                              for a, b, ns in self.healed.get(n, [])))

    def kinds_during(self, start, end):
        return sorted({k for a, b, k in self.active if a <= end and b >= start}) or ["none"]


class Checker:
    def __init__(self, run_dir):
        self.run_dir = run_dir
        with open(os.path.join(run_dir, "run.json")) as f:
            self.meta = json.load(f)
        self.names = self.meta["names"]
        # Semaphore name -> k; the resource's slot names (the mutex names,
        # then "<semaphore>/<slot>" for each permit slot).
        self.semaphores = self.meta.get("semaphores", {})
        self.resource_names = self.meta.get("resource_names", self.names)
        self.rw_names = self.meta.get("rw_names", [])
        self.events = []
        for path in sorted(glob.glob(os.path.join(run_dir, "history", "*.jsonl"))):
            self.events += load_lines(path)
        self.nemesis = load_lines(os.path.join(run_dir, "nemesis.jsonl"))
        self.cli_runs = {r["run"]: r for r in load_lines(os.path.join(run_dir, "cli-runs.jsonl"))}
        self.clients = load_lines(os.path.join(run_dir, "clients.jsonl"))
        self.enforce, self.final = read_resource(os.path.join(run_dir, "resource.bin"), self.resource_names)
        self.pauses = Pauses(self.nemesis)
        window_ms = self.meta.get("guard_window_ms")
        self.nodes = self.meta.get("nodes", NODES)
        self.node_faults = NodeFaults(self.nemesis, window_ms * 1_000_000 if window_ms else DEFAULT_GUARD_WINDOW_NS,
                                      self.nodes)
        self.liveness_by_fault = {}
        self.semaphore_liveness_by_fault = {}
        self.rw_liveness_by_fault = {}
        self.why = {}
        self.v = {k: 0 for k in KINDS}
        self.examples = {k: [] for k in KINDS}
        self.observed = {"overlaps_at_resource": 0, "stale_writes_attempted": 0, "stale_writes_accepted": 0,
                         "touches_refused": 0, "writes_accepted": 0, "writes_unrecorded": 0, "abandoned": 0, "late_grants": 0}
        self.grants = []
        self.locks = []
        self.lock_proc = []  # the process of each entry of self.locks
        self.acquires, self.acquire_proc = [], []  # semaphore acquisitions, as self.locks
        self.rw_locks, self.rw_lock_proc = [], []  # readers' and writers' lock calls, as self.locks
        self.quorum_of = {}  # proc -> the quorum of its semaphore (its "start" record)
        self.expiry_of = {}  # proc -> its expiry, ns

    def violation(self, kind, detail):
        self.v[kind] += 1
        if len(self.examples[kind]) < 5:
            self.examples[kind].append(detail)

    # -- reading the history ------------------------------------------------

    def replay(self):
        by_proc = {}
        for e in self.events:
            by_proc.setdefault(e.get("proc"), []).append(e)
        self.writes = []
        self.timeout_ns = {}
        for proc, evs in by_proc.items():
            evs.sort(key=lambda e: e["t"])
            open_calls = {}
            grant = None
            writes_pending = 0
            for e in evs:
                op = e["op"]
                if op == "start":
                    self.timeout_ns[proc] = e["timeout_ms"] * 1_000_000
                    if e.get("quorum"):
                        self.quorum_of[proc] = e["quorum"]
                    if e.get("expiry_ms"):
                        self.expiry_of[proc] = e["expiry_ms"] * 1_000_000
                elif op in ("lock_begin", "unlock_begin", "acquire_begin", "release_begin"):
                    open_calls[op[:-6]] = e
                elif op == "acquire":
                    open_calls.pop("acquire", None)
                    self.acquires.append(e)
                    self.acquire_proc.append(proc)
                    self.check_call_bound(e, e["deadline"] + self.timeout_ns.get(proc, 0) + SLACK_NS, "acquire")
                    if e.get("ok"):
                        grant = {"proc": proc, "pids": [e["pid"]], "name": e["name"], "slot": e["slot"],
                                 "token": e["token"], "start": e["start"], "granted": e["end"],
                                 "until": e["until"], "released": None, "cli": False, "sem": True}
                        self.grants.append(grant)
                elif op == "release":
                    open_calls.pop("release", None)
                    if grant is not None and grant.get("sem") and grant["released"] is None:
                        grant["released"] = e["start"]
                    self.check_call_bound(e, e["start"] + self.timeout_ns.get(proc, 0) + SLACK_NS, "release")
                elif op == "lock":
                    open_calls.pop("lock", None)
                    if e.get("role"):
                        self.rw_locks.append(e)
                        self.rw_lock_proc.append(proc)
                    else:
                        self.locks.append(e)
                        self.lock_proc.append(proc)
                    self.check_call_bound(e, e["deadline"] + self.timeout_ns.get(proc, 0) + SLACK_NS, "lock")
                    if e.get("ok"):
                        grant = {"proc": proc, "pids": [e["pid"]], "name": e["name"], "token": e["token"],
                                 "start": e["start"], "granted": e["end"], "until": e["until"], "released": None,
                                 "cli": False, "role": e.get("role")}
                        self.grants.append(grant)
                elif op == "unlock":
                    open_calls.pop("unlock", None)
                    if grant is not None and not grant["cli"] and grant["released"] is None:
                        grant["released"] = e["start"]
                    self.check_call_bound(e, e["start"] + self.timeout_ns.get(proc, 0) + SLACK_NS, "unlock")
                elif op == "command":
                    run = self.cli_runs.get(e.get("run"), {})
                    grant = {"proc": proc, "pids": [e["pid"]], "name": e["name"], "token": int(e["token"]),
                             "start": run.get("start", e["t"]), "granted": e["t"], "until": None,
                             "released": None, "end": None, "left": None, "cli": True,
                             "tool": [p for p in (e.get("tool"), e.get("supervisor")) if p], "run": run}
                    self.grants.append(grant)
                elif op == "token_overflow":
                    self.violation("token_not_increasing", {"why": "token beyond 32 bits", "token": e["token"]})
                elif op == "late":
                    self.observed["late_grants"] += 1
                elif op == "enter":
                    if e["prev"] and e["prev_alive"]:
                        self.observed["overlaps_at_resource"] += 1
                elif op == "touch":
                    if not e["accepted"]:
                        self.observed["touches_refused"] += 1
                elif op == "write_intent":
                    writes_pending += 1
                elif op == "write":
                    writes_pending -= 1
                    self.writes.append(e)
                elif op == "abandon":
                    self.observed["abandoned"] += 1
                elif op == "leave":
                    if grant is not None and grant["name"] == e["name"]:
                        if grant["cli"]:
                            grant["end"] = grant["left"] = e["t"]
                        elif e.get("until") and e["until"] > grant["until"]:
                            grant["until"] = e["until"]
                if op in ("unlock_begin", "release_begin") and grant is not None and not grant["cli"]:
                    grant["released"] = e["start"]
            # A command that never left was killed (its lock lost, or the run
            # ended): it is known to have acted until its last record.
            if grant is not None and grant["cli"] and grant.get("left") is None:
                grant["end"] = evs[-1]["t"]
            for call, e in open_calls.items():
                self.violation("unfinished_call", {"call": call, "pid": e["pid"], "client": e.get("client"),
                                                   "began": e["t"]})
            self.observed["writes_unrecorded"] += max(0, writes_pending)

    def check_call_bound(self, e, bound, call):
        if e["end"] > bound and not self.pauses.paused_within([e["pid"]], e["start"], e["end"]):
            self.violation("unbounded_call", {"call": call, "pid": e["pid"], "client": e.get("client"),
                                              "ms": (e["end"] - e["start"]) / 1e6,
                                              "bound_ms": (bound - e["start"]) / 1e6})

    # -- the checks -----------------------------------------------------------

    def grant_end(self, g):
        if g["cli"]:
            return g.get("end") or g["granted"]
        return min(g["until"], g["released"]) if g["released"] else g["until"]

    def check_exclusion(self):
        for name in self.names:
            grants = sorted((g for g in self.grants if g["name"] == name), key=lambda g: g["granted"])
            open_grants = []  # earlier grants whose end is still ahead
            for g in grants:
                open_grants = [a for a in open_grants if self.grant_end(a) > g["granted"]]
                for a in open_grants:
                    if a["proc"] == g["proc"] and a["token"] == g["token"]:
                        continue
                    self.violation("two_holders", {
                        "name": name, "at": g["granted"],
                        "holder": {"pid": a["pids"][0], "token": a["token"], "granted": a["granted"],
                                   "end": self.grant_end(a), "cli": a["cli"]},
                        "second": {"pid": g["pids"][0], "token": g["token"], "cli": g["cli"]}})
                open_grants.append(g)

    def check_tokens(self):
        """B's token must exceed A's when A's grant had begun before B's lock
        call started, or had ended before B was granted (B's winning writes
        then ran on a node of A's quorum after A's key left it, and so after
        A's increment and write-back there)."""
        for name in self.names:
            for g, a in self.tokens_not_increasing([g for g in self.grants if g["name"] == name]):
                self.violation("token_not_increasing", {
                    "name": name, "token": g["token"], "pid": g["pids"][0], "lock_start": g["start"],
                    "granted": g["granted"],
                    "earlier": {"token": a["token"], "pid": a["pids"][0], "granted": a["granted"]}})

    def tokens_not_increasing(self, grants, pool=None):
        """The grants (of one name, or one slot) that break check_tokens'
        rule, each with the earlier grant whose token it should exceed:
        among themselves, or, given a pool, against the pool's grants."""
        late = {}
        for key, before in (("granted", lambda g: g["start"]), ("end", lambda g: g["granted"])):
            earlier = sorted(grants if pool is None else pool, key=lambda g: g[key] if key == "granted" else self.grant_end(g))
            best, best_g, k = 0, None, 0
            for g in sorted(grants, key=before):
                while k < len(earlier) and (earlier[k]["granted"] if key == "granted"
                                            else self.grant_end(earlier[k])) < before(g):
                    if earlier[k]["token"] > best:
                        best, best_g = earlier[k]["token"], earlier[k]
                    k += 1
                if best and g["token"] <= best and id(g) not in late:
                    late[id(g)] = (g, best_g)
        return list(late.values())

    def check_semaphores(self):
        """At most k grants of a semaphore at once, at most one per slot, and
        per slot the token rule of check_tokens."""
        for name, k in self.semaphores.items():
            grants = sorted((g for g in self.grants if g.get("sem") and g["name"] == name),
                            key=lambda g: g["granted"])
            open_grants = []
            for g in grants:
                open_grants = [a for a in open_grants if self.grant_end(a) > g["granted"]]
                if len(open_grants) >= k:
                    self.violation("more_than_k_holders", {
                        "name": name, "permits": k, "at": g["granted"], "holders": len(open_grants) + 1,
                        "held": [{"pid": a["pids"][0], "slot": a["slot"], "token": a["token"],
                                  "granted": a["granted"], "end": self.grant_end(a)} for a in open_grants],
                        "new": {"pid": g["pids"][0], "slot": g["slot"], "token": g["token"]}})
                for a in open_grants:
                    if a["slot"] == g["slot"]:
                        self.violation("slot_two_holders", {
                            "name": name, "slot": g["slot"], "at": g["granted"],
                            "holder": {"pid": a["pids"][0], "token": a["token"], "granted": a["granted"],
                                       "end": self.grant_end(a)},
                            "second": {"pid": g["pids"][0], "token": g["token"]}})
                open_grants.append(g)
            for slot in range(k):
                for g, a in self.tokens_not_increasing([g for g in grants if g["slot"] == slot]):
                    self.violation("slot_token_not_increasing", {
                        "name": name, "slot": slot, "token": g["token"], "pid": g["pids"][0],
                        "acquire_start": g["start"], "granted": g["granted"],
                        "earlier": {"token": a["token"], "pid": a["pids"][0], "granted": a["granted"]}})

    def check_rw(self):
        """Per read-write lock: no reader's grant overlapping a writer's, no
        two writers', and the token rule with readers (docstring)."""
        for name in self.rw_names:
            grants = sorted((g for g in self.grants if g.get("role") and g["name"] == name),
                            key=lambda g: g["granted"])
            open_grants = []
            for g in grants:
                open_grants = [a for a in open_grants if self.grant_end(a) > g["granted"]]
                for a in open_grants:
                    if (a["proc"] == g["proc"] and a["token"] == g["token"]) or \
                            a["role"] == g["role"] == "reader":
                        continue
                    kind = "two_writers" if a["role"] == g["role"] else "reader_with_writer"
                    self.violation(kind, {
                        "name": name, "at": g["granted"],
                        "holder": {"role": a["role"], "pid": a["pids"][0], "token": a["token"],
                                   "granted": a["granted"], "end": self.grant_end(a)},
                        "second": {"role": g["role"], "pid": g["pids"][0], "token": g["token"]}})
                open_grants.append(g)
            writers = [g for g in grants if g["role"] == "writer"]
            readers = [g for g in grants if g["role"] == "reader"]
            for g, a in self.tokens_not_increasing(writers, grants) + self.tokens_not_increasing(readers, writers):
                self.violation("rw_token_not_increasing", {
                    "name": name, "role": g["role"], "token": g["token"], "pid": g["pids"][0],
                    "lock_start": g["start"], "granted": g["granted"],
                    "earlier": {"role": a["role"], "token": a["token"], "pid": a["pids"][0],
                                "granted": a["granted"]}})

    def check_resource(self):
        accepted = {}
        for w in self.writes:
            if w["stale"]:
                self.observed["stale_writes_attempted"] += 1
            if not w["accepted"]:
                continue
            self.observed["writes_accepted"] += 1
            accepted[w["name"]] = accepted.get(w["name"], 0) + 1
            if w["stale"]:
                self.observed["stale_writes_accepted"] += 1
                self.violation("stale_write_accepted", {"name": w["name"], "token": w["token"],
                                                        "highest": w["highest"], "at": w["t"]})
            if w["overwrote"]:
                self.violation("lost_update", {"name": w["name"], "token": w["token"], "at": w["t"]})
        slack = self.observed["writes_unrecorded"]
        for name in self.resource_names:
            counter, n = self.final[name]["counter"], accepted.get(name, 0)
            if not n <= counter <= n + slack:
                self.violation("lost_update", {"name": name, "counter": counter, "accepted_writes": n,
                                               "unrecorded_writes": slack})

    def check_processes(self):
        for c in self.clients:
            if c["status"] != 0:
                self.violation("process_failed", {"client": c["client"], "status": c["status"]})
        for r in self.cli_runs.values():
            if r["status"] not in CLI_OK_STATUS:
                self.violation("process_failed", {"call": "redsync lock", "pid": r["pid"], "status": r["status"]})
        started = {g["run"].get("run"): g["granted"] for g in self.grants if g["cli"] and g["run"]}
        for r in self.cli_runs.values():
            waited = started.get(r["run"], r["end"]) - r["start"]
            if waited > r["wait_ns"] + r["timeout_ns"] + 2 * SLACK_NS and not self.pauses.paused_within(
                    [r["pid"]], r["start"], r["end"]):
                self.violation("unbounded_call", {"call": "redsync lock", "pid": r["pid"], "ms": waited / 1e6,
                                                  "status": r["status"]})

    def occupancy(self, g):
        """When grant g kept its name from others: a library grant from its
        grant to its unlock (plus slack), or to its validity's end when it
        never unlocked; a command of `redsync lock` from its start to its
        end, with slack on both sides for the tool around it."""
        if g["cli"]:
            # The tool holds the name until its command leaves; a command
            # that never left (stopped, then killed with its tool) kept it
            # until the tool's run ended.
            run_end = (g.get("run") or {}).get("end")
            end = max(g.get("left") or run_end or 0, g.get("end") or 0, g["granted"])
            return g["granted"] - SLACK_NS, end + SLACK_NS
        if g["released"]:
            return g["granted"], g["released"] + SLACK_NS
        return g["granted"], g["until"]

    def holder_gone_or_paused(self, g, start, end):
        """A holder of the name during [start, end] that was stopped, or
        that ended without letting the lock go (killed, crashed, lost)."""
        if self.pauses.paused_within(g["pids"] + g.get("tool", []), g["granted"], end):
            return True
        if g["cli"]:
            return g.get("left") is None
        return g["released"] is None

    def liveness_reason(self, e, proc):
        """Why failed call e is excused, or None when it is a violation (then
        self.why says what was wrong). A reader's or writer's call (e has a
        "role") is held back only by what excludes it (check_rw's docstring)."""
        start, end = e["start"], e["end"]
        if self.node_faults.voting_throughout(start, end, name=e["name"]) < self.nodes // 2 + 1:
            return "quorum_touched"
        if self.pauses.paused_within([e["pid"]], start, end):
            return "caller_paused"
        role = e.get("role")
        others = [g for g in self.grants if g["name"] == e["name"] and g["proc"] != proc and
                  (role != "reader" or g.get("role") == "writer")]
        during = [g for g in others if self.occupancy(g)[0] <= end and self.occupancy(g)[1] >= start]
        if any(self.holder_gone_or_paused(g, start, end) for g in during):
            return "holder_paused_or_gone"
        spans = [self.occupancy(g) for g in during]
        if role == "reader":
            # Writers waiting ahead of it in the line, until their calls return.
            spans += [(w["start"], w["end"]) for w, p in zip(self.rw_locks, self.rw_lock_proc)
                      if w["role"] == "writer" and w["name"] == e["name"] and p != proc and
                      w["start"] < start + SLACK_NS and w["end"] >= start and w["start"] <= end]
        # Contention within its bound: no long idle gap, no overtaking.
        allowed = self.timeout_ns.get(proc, 0) + CLAIM_EXTRA_NS + MAX_RETRY_DELAY_NS + SLACK_NS
        covered_to, gap = start, 0
        for a, b in sorted(spans):
            if a > covered_to:
                gap = max(gap, a - covered_to)
            covered_to = max(covered_to, b)
        gap = max(gap, end - covered_to)
        overtaken = [g for g in during if g["start"] > start + SLACK_NS and start < g["granted"] < end]
        if gap > allowed:
            self.why = {"why": "idle", "idle_ms": gap / 1e6, "allowed_ms": allowed / 1e6}
            return None
        if len(overtaken) > OVERTAKE_ALLOWANCE:
            self.why = {"why": "overtaken", "by_later_calls": len(overtaken)}
            return None
        return "contention"

    def semaphore_liveness_reason(self, e, proc):
        """Why failed acquisition e is excused, or None when it is a
        violation. A semaphore has no waiting line (a waiter may be
        overtaken any number of times), so contention is judged by the
        count alone: others must have held k permits for the whole call but
        for stretches no longer than a retry after a collision."""
        start, end = e["start"], e["end"]
        k = self.semaphores.get(e["name"], 1)
        q = self.quorum_of.get(proc, self.nodes // 2 + 1)
        # A node that a fault touched may keep a permit of an attempt whose
        # undo never reached it (sent while it was stopped, cut off or
        # resetting connections) for up to one expiry after the fault.
        reach = max((self.expiry_of[p] for p in self.quorum_of), default=0)
        if self.node_faults.voting_throughout(start, end, after_heal=reach, name=e["name"]) < q:
            return "quorum_touched"
        if self.pauses.paused_within([e["pid"]], start, end):
            return "caller_paused"
        during = [g for g in self.grants if g.get("sem") and g["name"] == e["name"] and g["proc"] != proc
                  and self.occupancy(g)[0] <= end and self.occupancy(g)[1] >= start]
        if any(self.holder_gone_or_paused(g, start, end) for g in during):
            return "holder_paused_or_gone"
        # The longest stretch of the call with fewer than k permits held by
        # others. A waiter retries within the longest retry delay, or at
        # once when woken by a release; one that collided with another
        # waiter (each granted by some nodes, neither by a quorum) undoes
        # and retries within one more retry delay.
        allowed = self.timeout_ns.get(proc, 0) + 2 * MAX_RETRY_DELAY_NS + SLACK_NS
        edges = sorted([(self.occupancy(g)[0], 1) for g in during] + [(self.occupancy(g)[1], -1) for g in during])
        held, free_since, gap = 0, start, 0
        for t, step in edges:
            if t > start and held < k and free_since is not None:
                gap = max(gap, min(t, end) - max(free_since, start))
            held += step
            free_since = None if held >= k else (free_since if free_since is not None else t)
        if free_since is not None:
            gap = max(gap, end - max(free_since, start))
        if gap > allowed:
            self.why = {"why": "idle", "fewer_than_k_held_ms": gap / 1e6, "allowed_ms": allowed / 1e6}
            return None
        return "contention"

    def check_semaphore_liveness(self):
        for e, proc in zip(self.acquires, self.acquire_proc):
            kinds = self.node_faults.kinds_during(e["start"], e["end"])
            reason = "acquired" if e.get("ok") else self.semaphore_liveness_reason(e, proc)
            self.count_liveness(self.semaphore_liveness_by_fault, kinds, reason)
            if reason is None:
                self.violation("semaphore_liveness", dict(self.why, name=e["name"], pid=e["pid"],
                                                          client=e.get("client"), error=e.get("error"),
                                                          ms=(e["end"] - e["start"]) / 1e6, start=e["start"],
                                                          faults=kinds))

    @staticmethod
    def count_liveness(table, kinds, reason):
        for k in kinds:
            row = table.setdefault(k, {"lock_calls": 0, "acquired": 0, "excused": {}, "violations": 0})
            row["lock_calls"] += 1
            if reason == "acquired":
                row["acquired"] += 1
            elif reason is None:
                row["violations"] += 1
            else:
                row["excused"][reason] = row["excused"].get(reason, 0) + 1
        for row in table.values():
            row["liveness"] = round(row["acquired"] / row["lock_calls"], 3) if row["lock_calls"] else 0.0

    def check_liveness(self):
        for e, proc, table, kind in ([(e, p, self.liveness_by_fault, "liveness")
                                      for e, p in zip(self.locks, self.lock_proc)] +
                                     [(e, p, self.rw_liveness_by_fault, "rw_liveness")
                                      for e, p in zip(self.rw_locks, self.rw_lock_proc)]):
            kinds = self.node_faults.kinds_during(e["start"], e["end"])
            reason = "acquired" if e.get("ok") else self.liveness_reason(e, proc)
            self.count_liveness(table, kinds, reason)
            if reason is None:
                self.violation(kind, dict(self.why, name=e["name"], pid=e["pid"], client=e.get("client"),
                                          role=e.get("role"), error=e.get("error"),
                                          ms=(e["end"] - e["start"]) / 1e6, start=e["start"], faults=kinds))

    def summary(self):
        self.replay()
        self.check_exclusion()
        self.check_tokens()
        self.check_semaphores()
        self.check_rw()
        self.check_resource()
        self.check_processes()
        self.check_liveness()
        self.check_semaphore_liveness()
        ok = sum(1 for e in self.locks if e.get("ok"))
        errors = {}
        for e in self.locks:
            if not e.get("ok"):
                errors[e["error"]] = errors.get(e["error"], 0) + 1
        acquired = sum(1 for e in self.acquires if e.get("ok"))
        acquire_errors = {}
        for e in self.acquires:
            if not e.get("ok"):
                acquire_errors[e["error"]] = acquire_errors.get(e["error"], 0) + 1
        rw_ok = sum(1 for e in self.rw_locks if e.get("ok"))
        rw_errors = {}
        for e in self.rw_locks:
            if not e.get("ok"):
                rw_errors[e["error"]] = rw_errors.get(e["error"], 0) + 1
        cli_status = {}
        for r in self.cli_runs.values():
            cli_status[str(r["status"])] = cli_status.get(str(r["status"]), 0) + 1
        faults, skipped = {}, {}
        for e in self.nemesis:
            if e["op"] == "fault":
                faults[e["kind"]] = faults.get(e["kind"], 0) + 1
            elif e["op"] == "skip":
                skipped[e["kind"]] = skipped.get(e["kind"], 0) + 1
        return {
            "seed": self.meta["seed"],
            "config": self.meta["config"],
            "duration_s": self.meta["duration"],
            "fencing_enforced": self.enforce,
            "operations": {
                "lock_calls": len(self.locks), "lock_ok": ok,
                "liveness": round(ok / len(self.locks), 3) if self.locks else 0.0,
                "lock_errors": errors,
                "grants": len(self.grants),
                "semaphores": self.semaphores,
                "acquire_calls": len(self.acquires), "acquire_ok": acquired,
                "semaphore_liveness": round(acquired / len(self.acquires), 3) if self.acquires else 0.0,
                "acquire_errors": acquire_errors,
                "rw_names": self.rw_names,
                "rw_lock_calls": len(self.rw_locks), "rw_lock_ok": rw_ok,
                "rw_reader_grants": sum(1 for g in self.grants if g.get("role") == "reader"),
                "rw_writer_grants": sum(1 for g in self.grants if g.get("role") == "writer"),
                "rw_liveness": round(rw_ok / len(self.rw_locks), 3) if self.rw_locks else 0.0,
                "rw_lock_errors": rw_errors,
                "cli_runs": len(self.cli_runs), "cli_exit_status": cli_status,
            },
            "liveness_by_fault": self.liveness_by_fault,
            "semaphore_liveness_by_fault": self.semaphore_liveness_by_fault,
            "rw_liveness_by_fault": self.rw_liveness_by_fault,
            "faults": faults,
            "skipped_faults": skipped,
            "observed": self.observed,
            "violations": self.v,
            "examples": {k: x for k, x in self.examples.items() if x},
            "final_counters": {n: self.final[n]["counter"] for n in self.resource_names},
        }


def check(run_dir):
    return Checker(run_dir).summary()
