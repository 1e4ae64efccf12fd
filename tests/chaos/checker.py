"""The checker: reads a run's recorded history and reports what it shows.

Inputs (in the run folder): history/*.jsonl (clients and the commands run by
`redsync lock`), cli-runs.jsonl (each `redsync lock` invocation),
nemesis.jsonl, and the resource file's final state. All times are
CLOCK_MONOTONIC nanoseconds, the same clock in every process.

Violations (each must be 0):
- two_holders: a section entered the resource while another section still
  occupied it, and neither holder was paused by the nemesis nor past the
  validity its lock reported (`until`). An overlap that a pause or an
  overstayed validity explains is counted apart: Redlock cannot prevent it,
  fencing must make it harmless.
- stale_write_accepted: a write accepted although a higher token had touched
  the resource since (possible only with fencing off: the meta-test).
- lost_update: an accepted write that overwrote another section's increment,
  or a final counter that differs from the number of accepted writes.
- token_not_increasing: a section whose lock was acquired after an earlier
  section of the same name had ended, with a token not above that section's.
- unbounded_call: a lock call that returned later than its deadline plus one
  per-node command timeout (plus scheduling slack), or an unlock later than
  one command timeout plus slack, while its process was not paused; a
  `redsync lock` that gave up later than --wait plus slack.
"""

import glob
import json
import os
import struct

SLACK_NS = 500_000_000  # scheduling slack on a loaded 2-core machine


def load_lines(path):
    out = []
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
    """When each client process was stopped by the nemesis."""

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


def sections_of(events):
    """Critical sections keyed by marker, with the lock call that led to each."""
    sections = {}
    by_pid = {}
    for e in events:
        by_pid.setdefault(e.get("pid"), []).append(e)
    for pid, evs in by_pid.items():
        evs.sort(key=lambda e: e["t"])
        last_lock = None
        command = None
        current = None  # a process runs one section at a time
        for e in evs:
            op = e["op"]
            if op == "lock":
                last_lock = e
            elif op == "command":
                command = e
            elif op == "enter":
                s = {"pid": pid, "client": e.get("client"), "name": e["name"], "token": e["token"],
                     "marker": e["marker"], "enter": e["t"], "leave": None, "until": e["until"],
                     "prev": e["prev"], "prev_alive": e["prev_alive"], "last": e["t"], "writes": [],
                     "pids": [pid]}
                if last_lock is not None and last_lock.get("ok") and last_lock["token"] == e["token"]:
                    s["lock_start"], s["lock_end"] = last_lock["start"], last_lock["end"]
                elif command is not None:
                    s["pids"] += [command.get("supervisor"), command.get("tool")]
                    s["tool"] = command.get("tool")
                sections[e["marker"]] = s
                current = s
            elif op in ("touch", "write", "abandon", "leave"):
                s = current if op != "leave" else sections.get(e["marker"])
                if s is None:
                    continue
                s["last"] = e["t"]
                if op == "leave":
                    s["leave"] = e["t"]
                    if e.get("until"):
                        s["until"] = e["until"]
                elif op == "write":
                    s["writes"].append(e)
                elif op == "touch":
                    s["touch"] = e
    return sections


def check(run_dir):
    meta = json.load(open(os.path.join(run_dir, "run.json")))
    names = meta["names"]
    events = []
    for path in sorted(glob.glob(os.path.join(run_dir, "history", "*.jsonl"))):
        events += load_lines(path)
    nemesis = load_lines(os.path.join(run_dir, "nemesis.jsonl"))
    cli_runs = load_lines(os.path.join(run_dir, "cli-runs.jsonl")) if os.path.exists(
        os.path.join(run_dir, "cli-runs.jsonl")) else []
    enforce, final = read_resource(os.path.join(run_dir, "resource.bin"), names)
    pauses = Pauses(nemesis)
    sections = sections_of(events)
    v = {k: 0 for k in ("two_holders", "stale_write_accepted", "lost_update", "token_not_increasing",
                        "unbounded_call")}
    examples = {k: [] for k in v}
    observed = {"overlaps": 0, "overlaps_after_client_pause": 0, "overlaps_past_validity": 0,
                "stale_writes_attempted": 0, "stale_writes_accepted": 0, "touches_refused": 0,
                "writes_accepted": 0, "abandoned": 0}

    def violation(kind, detail):
        v[kind] += 1
        if len(examples[kind]) < 5:
            examples[kind].append(detail)

    # Mutual exclusion, as the resource saw it.
    def stale_at(s, t):
        start = s.get("lock_end", s["enter"] - 10_000_000_000)
        if pauses.paused_within([p for p in s["pids"] if p], start, t):
            return "pause"
        if s["until"] and t > s["until"]:
            return "validity"
        return None

    for s in sections.values():
        if not s["prev"] or not s["prev_alive"]:
            continue
        observed["overlaps"] += 1
        p = sections.get(s["prev"])
        t = s["enter"]
        why = stale_at(s, t) or (stale_at(p, t) if p else "unknown")
        if why == "pause":
            observed["overlaps_after_client_pause"] += 1
        elif why == "validity":
            observed["overlaps_past_validity"] += 1
        else:
            violation("two_holders", {"name": s["name"], "at": t, "entering": [s["pid"], s["token"]],
                                      "occupant": [p["pid"], p["token"]] if p else s["prev"]})

    # Fencing and lost updates.
    accepted_by_name = {}
    for s in sections.values():
        if "touch" in s and not s["touch"]["accepted"]:
            observed["touches_refused"] += 1
        for w in s["writes"]:
            if w["stale"]:
                observed["stale_writes_attempted"] += 1
            if w["accepted"]:
                observed["writes_accepted"] += 1
                accepted_by_name[s["name"]] = accepted_by_name.get(s["name"], 0) + 1
                if w["stale"]:
                    observed["stale_writes_accepted"] += 1
                    violation("stale_write_accepted", {"name": s["name"], "token": s["token"],
                                                       "highest": w["highest"], "at": w["t"]})
                if w["overwrote"]:
                    violation("lost_update", {"name": s["name"], "token": s["token"], "at": w["t"]})
    observed["abandoned"] = sum(1 for e in events if e["op"] == "abandon")
    for name in names:
        if final[name]["counter"] != accepted_by_name.get(name, 0):
            violation("lost_update", {"name": name, "counter": final[name]["counter"],
                                      "accepted_writes": accepted_by_name.get(name, 0)})

    # Tokens: a lock acquired after an earlier section of its name ended must
    # carry a higher token.
    cli_start = {r["pid"]: r["start"] for r in cli_runs if "pid" in r}
    for name in names:
        secs = [s for s in sections.values() if s["name"] == name]
        for s in secs:
            s["acquire_start"] = s.get("lock_start") or cli_start.get(s.get("tool"), s["enter"])
            s["end"] = s["leave"] or s["last"]
        by_end = sorted(secs, key=lambda s: s["end"])
        best, best_s, k = 0, None, 0
        for s in sorted(secs, key=lambda s: s["acquire_start"]):
            while k < len(by_end) and by_end[k]["end"] < s["acquire_start"]:
                if by_end[k]["token"] > best:
                    best, best_s = by_end[k]["token"], by_end[k]
                k += 1
            if best and s["token"] <= best:
                violation("token_not_increasing", {"name": name, "token": s["token"], "earlier_token": best,
                                                   "earlier_pid": best_s["pid"], "pid": s["pid"],
                                                   "at": s["acquire_start"]})

    # Bounded calls, and liveness.
    timeouts = {}
    for e in events:
        if e["op"] == "start":
            timeouts[e["pid"]] = e["timeout_ms"] * 1_000_000
    locks = [e for e in events if e["op"] == "lock"]
    for e in locks:
        bound = e["deadline"] + timeouts.get(e["pid"], 0) + SLACK_NS
        if e["end"] > bound and not pauses.paused_within([e["pid"]], e["start"], e["end"]):
            violation("unbounded_call", {"call": "lock", "pid": e["pid"], "ms": (e["end"] - e["start"]) / 1e6,
                                         "bound_ms": (bound - e["start"]) / 1e6})
    for e in events:
        if e["op"] != "unlock":
            continue
        bound = e["start"] + timeouts.get(e["pid"], 0) + SLACK_NS
        if e["end"] > bound and not pauses.paused_within([e["pid"]], e["start"], e["end"]):
            violation("unbounded_call", {"call": "unlock", "pid": e["pid"], "ms": (e["end"] - e["start"]) / 1e6,
                                         "bound_ms": (bound - e["start"]) / 1e6})
    for r in cli_runs:
        if r.get("status") not in (75, 69) or "wait_ns" not in r:
            continue
        if r["end"] - r["start"] > r["wait_ns"] + r["timeout_ns"] + 2 * SLACK_NS:
            violation("unbounded_call", {"call": "redsync lock", "pid": r.get("pid"),
                                         "ms": (r["end"] - r["start"]) / 1e6, "status": r["status"]})

    ok = sum(1 for e in locks if e.get("ok"))
    errors = {}
    for e in locks:
        if not e.get("ok"):
            errors[e["error"]] = errors.get(e["error"], 0) + 1
    cli_status = {}
    for r in cli_runs:
        cli_status[str(r.get("status"))] = cli_status.get(str(r.get("status")), 0) + 1

    faults, skipped = {}, {}
    for e in nemesis:
        if e["op"] == "fault":
            faults[e["kind"]] = faults.get(e["kind"], 0) + 1
        elif e["op"] == "skip":
            skipped[e["kind"]] = skipped.get(e["kind"], 0) + 1

    return {
        "seed": meta["seed"],
        "config": meta["config"],
        "duration_s": meta["duration"],
        "fencing_enforced": enforce,
        "operations": {
            "lock_calls": len(locks), "lock_ok": ok,
            "liveness": round(ok / len(locks), 3) if locks else 0.0,
            "lock_errors": errors,
            "unlock_calls": sum(1 for e in events if e["op"] == "unlock"),
            "sections": len(sections),
            "cli_runs": len(cli_runs), "cli_exit_status": cli_status,
        },
        "faults": faults,
        "skipped_faults": skipped,
        "observed": observed,
        "violations": v,
        "examples": {k: x for k, x in examples.items() if x},
        "final_counters": {n: final[n]["counter"] for n in names},
    }
