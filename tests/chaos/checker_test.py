"""The checker's own tests: small made-up histories, each holding one kind of
violation (or none), so every kind the checker reports is shown to be seen,
and the cases an attacker review found it missing stay found.

    python3 tests/chaos/checker_test.py
"""

import json
import os
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402

MS = 1_000_000
NAMES = ["a"]
SEM = "s"  # the semaphore of the semaphore tests, k = History.permits
RW = "rw"  # the read-write lock of the read-write tests


class History:
    """Builds a run folder: clients' events, CLI runs, nemesis events."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="checker-test-")
        os.makedirs(os.path.join(self.dir, "history"))
        self.events, self.runs, self.nemesis, self.clients = [], [], [], []
        self.counter = 0
        self.permits = 0  # k of semaphore SEM, 0 = no semaphore in the run
        self.nodes = None  # run.json's "nodes" (cluster members), None = the default 5
        self.rw = False  # whether the run has read-write lock RW

    def rw_client(self, proc, role, pid=None, timeout_ms=50):
        """A reader or a writer of RW, as chaos_client rw records it."""
        pid = pid or proc
        self.rw = True
        self.events.append({"t": 0, "proc": proc, "pid": pid, "op": "start", "mode": "rw", "role": role,
                            "nodes": 5, "quorum": 3, "expiry_ms": 1000, "timeout_ms": timeout_ms})
        self.clients.append({"client": "%s%d" % (role, proc), "pid": pid, "status": 0})
        return role

    def rw_lock(self, proc, role, start, end, token, until, ok=True, pid=None):
        pid = pid or proc
        deadline = start + 3000 * MS
        self.events.append({"t": start, "proc": proc, "pid": pid, "op": "lock_begin", "name": RW, "role": role,
                            "start": start, "deadline": deadline})
        self.events.append({"t": end, "proc": proc, "pid": pid, "op": "lock", "name": RW, "role": role,
                            "start": start, "end": end, "deadline": deadline, "token": token if ok else 0,
                            "until": until if ok else 0, "ok": ok, "error": "" if ok else "busy"})

    def rw_unlock(self, proc, role, start, end, pid=None):
        pid = pid or proc
        self.events.append({"t": start, "proc": proc, "pid": pid, "op": "unlock_begin", "name": RW, "role": role,
                            "start": start})
        self.events.append({"t": end, "proc": proc, "pid": pid, "op": "unlock", "name": RW, "role": role,
                            "start": start, "end": end, "ok": True, "error": ""})

    def rw_hold(self, proc, role, start, token, length=50 * MS):
        """A whole cycle of a reader or writer: granted at start + 10 ms, unlocked after length."""
        self.rw_lock(proc, role, start, start + 10 * MS, token, start + 1000 * MS)
        self.rw_unlock(proc, role, start + length, start + length + 2 * MS)

    def sem_client(self, proc, permits=2, quorum=4, expiry_ms=1000, pid=None):
        """A semaphore client of SEM (k = permits), as chaos_client semaphore records it."""
        pid = pid or proc
        self.permits = permits
        self.events.append({"t": 0, "proc": proc, "pid": pid, "op": "start", "mode": "semaphore",
                            "permits": permits, "quorum": quorum, "expiry_ms": expiry_ms, "timeout_ms": 50})
        self.clients.append({"client": "s%d" % proc, "pid": pid, "status": 0})

    def acquire(self, proc, start, end, slot, token, until, ok=True, pid=None):
        pid = pid or proc
        deadline = start + 3000 * MS
        self.events.append({"t": start, "proc": proc, "pid": pid, "op": "acquire_begin", "name": SEM,
                            "start": start, "deadline": deadline})
        self.events.append({"t": end, "proc": proc, "pid": pid, "op": "acquire", "name": SEM, "start": start,
                            "end": end, "deadline": deadline, "slot": slot if ok else 0,
                            "token": token if ok else 0, "until": until if ok else 0, "ok": ok,
                            "error": "" if ok else "busy"})

    def release(self, proc, start, end, pid=None):
        pid = pid or proc
        self.events.append({"t": start, "proc": proc, "pid": pid, "op": "release_begin", "name": SEM,
                            "start": start})
        self.events.append({"t": end, "proc": proc, "pid": pid, "op": "release", "name": SEM, "start": start,
                            "end": end, "ok": True, "error": ""})

    def hold_permit(self, proc, start, slot, token, length=50 * MS):
        """A whole cycle of a permit: acquired at start (10 ms), released after length."""
        self.acquire(proc, start, start + 10 * MS, slot, token, start + 1000 * MS)
        self.release(proc, start + length, start + length + 2 * MS)

    def client(self, proc, pid=None, timeout_ms=50):
        pid = pid or proc
        self.events.append({"t": 0, "proc": proc, "pid": pid, "op": "start", "timeout_ms": timeout_ms})
        self.clients.append({"client": "c%d" % proc, "pid": pid, "status": 0})
        return pid

    def lock(self, proc, start, end, token, until, deadline=None, ok=True, pid=None):
        pid = pid or proc
        deadline = deadline or start + 3000 * MS
        self.events.append({"t": start, "proc": proc, "pid": pid, "op": "lock_begin", "name": "a", "start": start,
                            "deadline": deadline})
        self.events.append({"t": end, "proc": proc, "pid": pid, "op": "lock", "name": "a", "start": start,
                            "end": end, "deadline": deadline, "token": token if ok else 0,
                            "until": until if ok else 0, "ok": ok, "error": "" if ok else "busy"})

    def section(self, proc, t, token, write=True, pid=None, length=4):
        pid = pid or proc
        self.events.append({"t": t, "proc": proc, "pid": pid, "op": "enter", "name": "a", "token": token,
                            "marker": proc << 32 | t, "prev": 0, "prev_alive": False, "until": 0})
        self.events.append({"t": t + 1, "proc": proc, "pid": pid, "op": "touch", "name": "a", "token": token,
                            "accepted": True, "stale": False, "highest": 0, "counter": self.counter})
        if write:
            self.events.append({"t": t + 2, "proc": proc, "pid": pid, "op": "write_intent", "name": "a",
                                "token": token})
            self.events.append({"t": t + 3, "proc": proc, "pid": pid, "op": "write", "name": "a", "token": token,
                                "accepted": True, "stale": False, "overwrote": False, "highest": token,
                                "counter_before": self.counter, "value": self.counter + 1})
            self.counter += 1
        self.events.append({"t": t + length, "proc": proc, "pid": pid, "op": "leave", "name": "a", "token": token,
                            "marker": proc << 32 | t, "cleared": True, "until": 0})

    def unlock(self, proc, start, end, pid=None):
        pid = pid or proc
        self.events.append({"t": start, "proc": proc, "pid": pid, "op": "unlock_begin", "name": "a",
                            "start": start})
        self.events.append({"t": end, "proc": proc, "pid": pid, "op": "unlock", "name": "a", "start": start,
                            "end": end, "ok": True, "error": ""})

    def hold(self, proc, start, token, length=50 * MS, until_after=1000 * MS, pid=None):
        """A whole cycle: lock at start (10 ms), a section, unlock."""
        self.lock(proc, start, start + 10 * MS, token, start + until_after, pid=pid)
        self.section(proc, start + 11 * MS, token, pid=pid)
        self.unlock(proc, start + length, start + length + 2 * MS, pid=pid)

    def cli_run(self, run, proc, start, command_at, leave_at, end, token, status=0, tool=900, pid=None):
        pid = pid or proc
        self.runs.append({"op": "cli_run", "run": run, "pid": tool, "name": "a", "start": start, "end": end,
                          "status": status, "wait_ns": 3000 * MS, "timeout_ns": 100 * MS})
        self.events.append({"t": command_at, "proc": proc, "pid": pid, "op": "command", "name": "a",
                            "token": str(token), "supervisor": tool + 1, "tool": tool, "run": run})
        self.section(proc, command_at + 1, token, pid=pid, length=(leave_at or command_at + 5) - command_at - 1)
        if leave_at is None:  # killed in the section: drop its leave
            self.events.pop()

    def node_fault(self, kind, nodes, start, end, names=None):
        extra = {} if names is None else {"names": names}
        self.nemesis.append(dict({"t": start, "op": "fault", "kind": kind, "nodes": nodes}, **extra))
        self.nemesis.append(dict({"t": end, "op": "heal", "kind": kind, "nodes": nodes}, **extra))

    def pause(self, pid, start, end):
        self.nemesis.append({"t": start, "op": "fault", "kind": "client_pause", "pid": pid})
        self.nemesis.append({"t": end, "op": "heal", "kind": "client_pause", "pid": pid})

    def check(self, counter=None):
        return self.summary(counter)["violations"]

    def summary(self, counter=None):
        with open(os.path.join(self.dir, "history", "all.jsonl"), "w") as f:
            for e in self.events:
                f.write(json.dumps(e) + "\n")
        for name, rows in (("cli-runs.jsonl", self.runs), ("nemesis.jsonl", self.nemesis),
                           ("clients.jsonl", self.clients)):
            with open(os.path.join(self.dir, name), "w") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
        slots = ["%s/%d" % (SEM, s) for s in range(self.permits)]
        with open(os.path.join(self.dir, "run.json"), "w") as f:
            json.dump({"seed": 1, "config": "test", "duration": 1, "names": NAMES,
                       "semaphores": {SEM: self.permits} if self.permits else {},
                       "rw_names": [RW] if self.rw else [],
                       "resource_names": NAMES + slots, **({"nodes": self.nodes} if self.nodes else {})}, f)
        counter = self.counter if counter is None else counter
        with open(os.path.join(self.dir, "resource.bin"), "wb") as f:
            f.write(struct.pack("<QQQ", 0x31534F4148435352, 1 + len(slots), 1).ljust(64, b"\0"))
            f.write(struct.pack("<QQQ", 0, counter, 0).ljust(64, b"\0"))
            for _ in slots:  # the semaphore tests write nothing there
                f.write(b"\0" * 64)
        return checker.check(self.dir)


def only(violations, kind):
    return {k: n for k, n in violations.items() if n and k != kind}


class CheckerTest(unittest.TestCase):
    def test_a_clean_history_of_handed_over_locks_has_no_violation(self):
        h = History()
        h.client(1), h.client(2)
        h.hold(1, 0, token=1)
        h.hold(2, 100 * MS, token=2)
        h.lock(1, 40 * MS, 155 * MS, token=3, until=1155 * MS)  # waited in line, granted after 2's unlock
        self.assertEqual({k: n for k, n in h.check().items() if n}, {})

    def test_a_grant_inside_a_valid_grant_is_two_holders_even_if_the_first_holder_was_paused(self):
        h = History()
        h.client(1), h.client(2)
        h.lock(1, 0, 10 * MS, token=1, until=1000 * MS)
        h.pause(1, 30 * MS, 2000 * MS)
        h.lock(2, 50 * MS, 110 * MS, token=2, until=1100 * MS)
        v = h.check()
        self.assertGreaterEqual(v["two_holders"], 1)

    def test_a_grant_after_the_first_holders_validity_is_not_two_holders(self):
        h = History()
        h.client(1), h.client(2)
        h.lock(1, 0, 10 * MS, token=1, until=1000 * MS)
        h.lock(2, 50 * MS, 1010 * MS, token=2, until=2000 * MS)
        self.assertEqual(h.check()["two_holders"], 0)

    def test_a_command_run_by_redsync_lock_overlapped_by_a_grant_is_two_holders(self):
        h = History()
        h.client(2)
        h.cli_run("r1", 1, start=0, command_at=20 * MS, leave_at=500 * MS, end=600 * MS, token=1)
        h.lock(2, 100 * MS, 200 * MS, token=2, until=1200 * MS)
        self.assertGreaterEqual(h.check()["two_holders"], 1)

    def test_a_command_overlapped_while_its_redsync_tool_was_stopped_is_still_two_holders(self):
        h = History()
        h.client(2)
        h.cli_run("r1", 1, start=0, command_at=20 * MS, leave_at=500 * MS, end=600 * MS, token=1, tool=900)
        h.pause(900, 30 * MS, 400 * MS)
        h.lock(2, 100 * MS, 200 * MS, token=2, until=1200 * MS)
        self.assertGreaterEqual(h.check()["two_holders"], 1)

    def test_a_token_equal_to_the_previous_holders_is_not_increasing(self):
        h = History()
        h.client(1), h.client(2)
        h.hold(1, 0, token=10)
        h.lock(2, 5 * MS, 70 * MS, token=10, until=1070 * MS)  # began while 1 held: a hand-over
        self.assertGreaterEqual(h.check()["token_not_increasing"], 1)

    def test_a_lower_token_after_an_earlier_grant_is_not_increasing(self):
        h = History()
        h.client(1), h.client(2)
        h.hold(1, 0, token=10)
        h.hold(2, 100 * MS, token=3)
        self.assertGreaterEqual(h.check()["token_not_increasing"], 1)

    def test_a_token_beyond_32_bits_is_reported(self):
        h = History()
        h.client(1)
        h.events.append({"t": 5, "proc": 1, "pid": 1, "op": "token_overflow", "name": "a", "token": 2**32 + 5})
        self.assertGreaterEqual(h.check()["token_not_increasing"], 1)

    def test_an_accepted_stale_write_is_reported(self):
        h = History()
        h.client(1)
        h.hold(1, 0, token=1)
        w = next(e for e in h.events if e["op"] == "write")
        w["stale"] = True
        self.assertGreaterEqual(h.check()["stale_write_accepted"], 1)

    def test_a_write_that_overwrote_another_is_a_lost_update(self):
        h = History()
        h.client(1)
        h.hold(1, 0, token=1)
        next(e for e in h.events if e["op"] == "write")["overwrote"] = True
        self.assertGreaterEqual(h.check()["lost_update"], 1)

    def test_a_counter_below_the_accepted_writes_is_a_lost_update(self):
        h = History()
        h.client(1)
        h.hold(1, 0, token=1)
        h.hold(1, 100 * MS, token=2)
        self.assertGreaterEqual(h.check(counter=1)["lost_update"], 1)

    def test_a_writer_killed_after_its_write_is_not_a_lost_update(self):
        h = History()
        h.client(1)
        h.hold(1, 0, token=1)
        h.events = [e for e in h.events if e["op"] not in ("write", "leave")]
        self.assertEqual(h.check(counter=1)["lost_update"], 0)

    def test_a_lock_call_returning_past_its_deadline_is_unbounded(self):
        h = History()
        h.client(1, timeout_ms=50)
        h.lock(1, 0, 4000 * MS, token=0, until=0, deadline=3000 * MS, ok=False)
        self.assertEqual(h.check()["unbounded_call"], 1)

    def test_a_lock_call_of_a_paused_client_is_not_held_to_its_bound(self):
        h = History()
        h.client(1, timeout_ms=50)
        h.pause(1, 1000 * MS, 3500 * MS)
        h.lock(1, 0, 4000 * MS, token=0, until=0, deadline=3000 * MS, ok=False)
        self.assertEqual(h.check()["unbounded_call"], 0)

    def test_a_redsync_lock_run_waiting_past_its_wait_is_unbounded(self):
        h = History()
        h.runs.append({"op": "cli_run", "run": "r", "pid": 5, "name": "a", "start": 0, "end": 9000 * MS,
                       "status": 75, "wait_ns": 3000 * MS, "timeout_ns": 100 * MS})
        self.assertEqual(h.check()["unbounded_call"], 1)

    def test_a_call_that_never_returned_is_unfinished(self):
        h = History()
        h.client(1)
        h.events.append({"t": 5, "proc": 1, "pid": 1, "op": "lock_begin", "name": "a", "start": 5,
                         "deadline": 3000 * MS})
        self.assertEqual(h.check()["unfinished_call"], 1)

    def test_a_crashed_client_or_an_internal_error_of_the_tool_is_a_failed_process(self):
        h = History()
        h.client(1)
        h.clients[0]["status"] = -11
        h.runs.append({"op": "cli_run", "run": "r", "pid": 5, "name": "a", "start": 0, "end": 10 * MS,
                       "status": 70, "wait_ns": 3000 * MS, "timeout_ns": 100 * MS})
        self.assertEqual(h.check()["process_failed"], 2)

    def test_reused_pids_do_not_merge_two_processes(self):
        h = History()
        h.client(1, pid=77), h.client(2, pid=77)
        h.hold(1, 0, token=1, pid=77)
        h.hold(2, 100 * MS, token=2, pid=77)
        self.assertEqual({k: n for k, n in h.check().items() if n}, {})


class LivenessTest(unittest.TestCase):
    """A failed lock call is a liveness violation unless a quorum was touched
    by a fault, its own process or a holder of the name was stopped or gone,
    or it was contention within its bound."""

    def test_a_call_that_fails_while_the_lock_sat_free_and_every_node_was_up_is_a_violation(self):
        h = History()
        h.client(1), h.client(2)
        h.hold(1, 0, token=1)  # held 50 ms, then free for good
        h.lock(2, 20 * MS, 3020 * MS, token=0, until=0, ok=False)
        s = h.summary()
        self.assertEqual(s["violations"]["liveness"], 1)
        self.assertEqual(s["examples"]["liveness"][0]["why"], "idle")
        self.assertEqual(s["liveness_by_fault"]["none"]["violations"], 1)

    def test_a_call_that_fails_while_another_client_held_the_lock_throughout_is_contention(self):
        h = History()
        h.client(1), h.client(2)
        h.hold(1, 0, token=1, length=3500 * MS, until_after=4000 * MS)
        h.lock(2, 20 * MS, 3020 * MS, token=0, until=0, ok=False)
        s = h.summary()
        self.assertEqual(s["violations"]["liveness"], 0)
        self.assertEqual(s["liveness_by_fault"]["none"]["excused"], {"contention": 1})

    def test_short_hand_over_gaps_between_earlier_arrivals_are_contention_not_idleness(self):
        h = History()
        h.client(2)
        for k in range(10):  # ten clients in line before 2, served in turn, 290 ms each, 10 ms gaps
            p = 10 + k
            h.client(p)
            h.lock(p, k * MS, k * 300 * MS + 5 * MS, token=k + 1, until=k * 300 * MS + 2000 * MS)
            h.section(p, k * 300 * MS + 6 * MS, token=k + 1)
            h.unlock(p, k * 300 * MS + 290 * MS, k * 300 * MS + 291 * MS)
        h.lock(2, 100 * MS, 3100 * MS, token=0, until=0, ok=False)
        self.assertEqual(h.check()["liveness"], 0)

    def test_a_call_overtaken_by_many_later_arrivals_is_a_violation(self):
        h = History()
        h.client(1), h.client(2)
        h.lock(2, 0, 3000 * MS, token=0, until=0, ok=False)
        for k in range(10):  # 1 arrives after 2 every time, and is served every time
            h.hold(1, 100 * MS + k * 280 * MS, token=k + 1, length=270 * MS)
        s = h.summary()
        self.assertEqual(s["violations"]["liveness"], 1)
        self.assertEqual(s["examples"]["liveness"][0]["why"], "overtaken")

    def test_a_call_that_fails_while_a_majority_of_nodes_was_faulted_is_excused_and_counted_under_its_fault(self):
        h = History()
        h.client(2)
        h.node_fault("pause_long", [0, 1], 100 * MS, 2000 * MS)
        h.node_fault("stall", [2], 500 * MS, 900 * MS)
        h.lock(2, 0, 3000 * MS, token=0, until=0, ok=False)
        s = h.summary()
        self.assertEqual(s["violations"]["liveness"], 0)
        self.assertEqual(s["liveness_by_fault"]["pause_long"]["excused"], {"quorum_touched": 1})
        self.assertEqual(s["liveness_by_fault"]["stall"]["lock_calls"], 1)

    def test_a_cluster_fault_excuses_only_the_names_whose_slots_it_touched(self):
        # 3 cluster members (quorum 2): failovers on two members, each of a
        # master serving another name's slot, do not excuse a failure of "a";
        # the same failovers naming "a" do.
        for names, violations in ((["b"], 1), (["a", "b"], 0)):
            h = History()
            h.nodes = 3
            h.client(2)
            h.node_fault("kill_promote", [0], 100 * MS, 200 * MS, names=names)
            h.node_fault("reshard", [1], 100 * MS, 200 * MS, names=names)
            h.lock(2, 1000 * MS, 4000 * MS, token=0, until=0, ok=False)
            s = h.summary()
            self.assertEqual(s["violations"]["liveness"], violations, names)
            if not violations:
                self.assertEqual(s["liveness_by_fault"]["kill_promote"]["excused"], {"quorum_touched": 1})

    def test_every_cluster_fault_that_may_lose_writes_keeps_its_names_out_for_two_guard_windows(self):
        # 3 members (quorum 2), the fault on two of them, healed at 200 ms:
        # a failure 3 s later (within 2 x 3 s) is excused, one 7 s later is
        # not. Every kind the cluster nemesis can inject outside NO_LOSS,
        # so a new kind missing from checker.NEEDS_WINDOW fails here.
        from cluster_nemesis import CLUSTER_KINDS, NO_LOSS
        for kind in sorted(set(CLUSTER_KINDS) - set(NO_LOSS)):
            for at, violations in ((3000, 0), (7000, 1)):
                h = History()
                h.nodes = 3
                h.client(2)
                h.node_fault(kind, [0, 1], 100 * MS, 200 * MS, names=["a"])
                h.lock(2, at * MS, (at + 1000) * MS, token=0, until=0, ok=False)
                self.assertEqual(h.check()["liveness"], violations, (kind, at))

    def test_a_node_restarted_empty_does_not_vote_for_two_guard_windows_after_its_restart(self):
        h = History()
        h.client(2)
        h.node_fault("restart_empty", [0], 0, 10 * MS)
        h.node_fault("kill_restart", [1], 0, 10 * MS)
        h.node_fault("flush", [2], 0, 10 * MS)
        h.lock(2, 5000 * MS, 8000 * MS, token=0, until=0, ok=False)  # within 2 x 3 s of the restarts
        self.assertEqual(h.check()["liveness"], 0)
        h.events.clear()
        h.client(2)
        h.lock(2, 7000 * MS, 10000 * MS, token=0, until=0, ok=False)  # after: every node votes again
        self.assertEqual(h.check()["liveness"], 1)

    def test_a_call_in_the_first_two_guard_windows_of_the_run_is_excused_every_node_is_new(self):
        h = History()
        h.client(2)
        h.nemesis.append({"t": 0, "op": "start", "seed": 1, "config": "test"})
        h.lock(2, 10 * MS, 3010 * MS, token=0, until=0, ok=False)
        s = h.summary()
        self.assertEqual(s["violations"]["liveness"], 0)
        self.assertEqual(s["liveness_by_fault"]["cluster_start"]["excused"], {"quorum_touched": 1})

    def test_a_call_that_fails_while_the_holder_was_paused_is_excused(self):
        h = History()
        h.client(1), h.client(2)
        h.lock(1, 0, 10 * MS, token=1, until=1000 * MS)
        h.pause(1, 20 * MS, 2500 * MS)
        h.lock(2, 30 * MS, 3030 * MS, token=0, until=0, ok=False)
        s = h.summary()
        self.assertEqual(s["violations"]["liveness"], 0)
        self.assertEqual(s["liveness_by_fault"]["client_pause"]["excused"], {"holder_paused_or_gone": 1})

    def test_a_call_that_fails_after_the_holder_died_without_unlocking_is_excused(self):
        h = History()
        h.client(1), h.client(2)
        h.lock(1, 0, 10 * MS, token=1, until=1000 * MS)  # never unlocks: the process was killed
        h.lock(2, 30 * MS, 3030 * MS, token=0, until=0, ok=False)
        self.assertEqual(h.check()["liveness"], 0)


class SemaphoreTest(unittest.TestCase):
    """A semaphore of k = 2 permits over 5 nodes (quorum 4): at most k grants
    at once, one per slot, tokens increasing per slot, and a failed
    acquisition judged by the count of permits others held."""

    def test_a_clean_history_of_two_slots_handed_over_has_no_violation(self):
        h = History()
        for p in (1, 2, 3):
            h.sem_client(p)
        h.hold_permit(1, 0, slot=0, token=5)
        h.hold_permit(2, 10 * MS, slot=1, token=6)
        # 3 waited while both were held, got slot 0 after 1 released it.
        h.acquire(3, 20 * MS, 55 * MS, slot=0, token=7, until=1055 * MS)
        h.release(3, 100 * MS, 102 * MS)
        # Tokens of different slots are not ordered: slot 1 may get a lower one.
        h.hold_permit(2, 200 * MS, slot=1, token=6 + 1)
        h.hold_permit(1, 300 * MS, slot=0, token=8)
        self.assertEqual({k: n for k, n in h.check().items() if n}, {})

    def test_a_third_grant_while_two_permits_are_held_is_more_than_k_holders(self):
        h = History()
        for p in (1, 2, 3):
            h.sem_client(p)
        h.acquire(1, 0, 10 * MS, slot=0, token=1, until=1000 * MS)
        h.acquire(2, 0, 20 * MS, slot=1, token=2, until=1000 * MS)
        h.acquire(3, 0, 30 * MS, slot=0, token=3, until=1000 * MS)  # k + 1 = 3 live grants
        s = h.summary()
        self.assertEqual(s["violations"]["more_than_k_holders"], 1)
        self.assertEqual(s["examples"]["more_than_k_holders"][0]["holders"], 3)
        # With slots in 0..k-1, a (k+1)th holder always shares a slot.
        self.assertEqual(s["violations"]["slot_two_holders"], 1)

    def test_a_grant_after_a_holders_validity_ended_is_not_more_than_k(self):
        h = History()
        for p in (1, 2, 3):
            h.sem_client(p)
        h.acquire(1, 0, 10 * MS, slot=0, token=1, until=500 * MS)  # never released: expired
        h.acquire(2, 0, 20 * MS, slot=1, token=2, until=1000 * MS)
        h.acquire(3, 400 * MS, 510 * MS, slot=0, token=3, until=1500 * MS)
        self.assertEqual({k: n for k, n in h.check().items() if n and k != "semaphore_liveness"}, {})

    def test_two_live_grants_of_one_slot_are_slot_two_holders_even_within_k(self):
        h = History()
        h.sem_client(1), h.sem_client(2)
        h.acquire(1, 0, 10 * MS, slot=1, token=1, until=1000 * MS)
        h.acquire(2, 0, 20 * MS, slot=1, token=2, until=1000 * MS)
        v = h.check()
        self.assertEqual(v["slot_two_holders"], 1)
        self.assertEqual(v["more_than_k_holders"], 0)

    def test_a_lower_token_on_a_slot_after_an_earlier_grant_of_it_is_not_increasing(self):
        h = History()
        h.sem_client(1), h.sem_client(2)
        h.hold_permit(1, 0, slot=0, token=10)
        h.hold_permit(2, 100 * MS, slot=0, token=10)  # equal: not above
        v = h.check()
        self.assertEqual(v["slot_token_not_increasing"], 1)
        self.assertEqual(v["token_not_increasing"], 0)  # the mutex rule is not applied across slots

    def test_an_acquisition_returning_past_its_deadline_or_never_is_reported(self):
        h = History()
        h.sem_client(1)
        h.acquire(1, 0, 4000 * MS, slot=0, token=0, until=0, ok=False)
        h.events.append({"t": 5000 * MS, "proc": 1, "pid": 1, "op": "acquire_begin", "name": SEM,
                         "start": 5000 * MS, "deadline": 8000 * MS})
        v = h.check()
        self.assertEqual(v["unbounded_call"], 1)
        self.assertEqual(v["unfinished_call"], 1)

    def test_a_failed_acquisition_while_a_permit_sat_free_is_a_violation(self):
        h = History()
        h.sem_client(1), h.sem_client(2)
        h.acquire(1, 0, 10 * MS, slot=0, token=1, until=4000 * MS)
        h.release(1, 3500 * MS, 3502 * MS)
        # One permit of two held throughout: the other was free for 3 s.
        h.acquire(2, 20 * MS, 3020 * MS, slot=0, token=0, until=0, ok=False)
        s = h.summary()
        self.assertEqual(s["violations"]["semaphore_liveness"], 1)
        self.assertEqual(s["examples"]["semaphore_liveness"][0]["why"], "idle")
        self.assertEqual(s["semaphore_liveness_by_fault"]["none"]["violations"], 1)
        self.assertEqual(s["violations"]["liveness"], 0)  # the mutex's rule is not applied to it

    def test_a_failed_acquisition_while_others_held_every_permit_is_contention(self):
        h = History()
        for p in (1, 2, 3):
            h.sem_client(p)
        # Two holders cycle; gaps of 10 ms between a release and the next grant.
        for n in range(10):
            h.hold_permit(1, n * 400 * MS, slot=0, token=2 * n + 1, length=390 * MS)
            h.hold_permit(2, n * 400 * MS + 5 * MS, slot=1, token=2 * n + 2, length=390 * MS)
        h.acquire(3, 20 * MS, 3020 * MS, slot=0, token=0, until=0, ok=False)
        s = h.summary()
        self.assertEqual(s["violations"]["semaphore_liveness"], 0)
        self.assertEqual(s["semaphore_liveness_by_fault"]["none"]["excused"], {"contention": 1})

    def test_one_faulted_node_does_not_excuse_a_failure_but_two_do_with_quorum_4(self):
        h = History()
        h.sem_client(2)
        h.node_fault("stall", [0], 0, 3500 * MS)
        h.acquire(2, 20 * MS, 3020 * MS, slot=0, token=0, until=0, ok=False)
        self.assertEqual(h.check()["semaphore_liveness"], 1)  # 4 nodes voting: a quorum of 4
        h.node_fault("pause_short", [1], 1000 * MS, 1200 * MS)
        s = h.summary()
        self.assertEqual(s["violations"]["semaphore_liveness"], 0)
        self.assertEqual(s["semaphore_liveness_by_fault"]["pause_short"]["excused"], {"quorum_touched": 1})

    def test_a_node_healed_less_than_one_expiry_before_the_call_still_counts_as_touched(self):
        # A permit of an attempt whose undo never reached it may stay there
        # for one expiry after the fault.
        h = History()
        h.sem_client(2, expiry_ms=1000)
        h.node_fault("drop", [0], 0, 0)
        h.node_fault("drop", [1], 0, 0)
        h.acquire(2, 900 * MS, 3900 * MS, slot=0, token=0, until=0, ok=False)
        self.assertEqual(h.check()["semaphore_liveness"], 0)
        h.events.clear()
        h.sem_client(2, expiry_ms=1000)
        h.acquire(2, 1500 * MS, 4500 * MS, slot=0, token=0, until=0, ok=False)  # past it: a violation
        self.assertEqual(h.check()["semaphore_liveness"], 1)

    def test_a_failed_acquisition_while_a_holder_was_paused_is_excused(self):
        h = History()
        for p in (1, 2, 3):
            h.sem_client(p)
        h.acquire(1, 0, 10 * MS, slot=0, token=1, until=1000 * MS)
        h.pause(1, 20 * MS, 2500 * MS)
        h.acquire(3, 30 * MS, 3030 * MS, slot=0, token=0, until=0, ok=False)
        s = h.summary()
        self.assertEqual(s["violations"]["semaphore_liveness"], 0)
        self.assertEqual(s["semaphore_liveness_by_fault"]["client_pause"]["excused"],
                         {"holder_paused_or_gone": 1})


class ReadWriteTest(unittest.TestCase):
    """Readers share the name, a writer holds it alone; writers' tokens
    increase, a reader's lies between the writers' around it."""

    def test_a_clean_history_of_readers_together_and_writers_alone_has_no_violation(self):
        h = History()
        r1, r2, w3, w4 = (h.rw_client(1, "reader"), h.rw_client(2, "reader"), h.rw_client(3, "writer"),
                          h.rw_client(4, "writer"))
        h.rw_hold(1, r1, 0, token=2, length=100 * MS)
        h.rw_hold(2, r2, 20 * MS, token=1, length=100 * MS)  # readers overlap; their tokens are not ordered
        h.rw_lock(3, w3, 50 * MS, 125 * MS, token=3, until=1125 * MS)  # waited for both readers
        h.rw_unlock(3, w3, 180 * MS, 182 * MS)
        h.rw_lock(1, r1, 150 * MS, 185 * MS, token=4, until=1185 * MS)  # waited for the writer
        h.rw_unlock(1, r1, 200 * MS, 202 * MS)
        h.rw_hold(4, w4, 300 * MS, token=5)
        s = h.summary()
        self.assertEqual({k: n for k, n in s["violations"].items() if n}, {})
        self.assertEqual((s["operations"]["rw_reader_grants"], s["operations"]["rw_writer_grants"]), (3, 2))

    def test_a_writer_granted_while_a_reader_holds_is_reported_either_way_round(self):
        for writer_first in (False, True):
            h = History()
            r, w = h.rw_client(1, "reader"), h.rw_client(2, "writer")
            first, second = ((2, w), (1, r)) if writer_first else ((1, r), (2, w))
            h.rw_lock(first[0], first[1], 0, 10 * MS, token=1, until=1000 * MS)
            h.rw_lock(second[0], second[1], 20 * MS, 30 * MS, token=2, until=1030 * MS)
            v = h.check()
            self.assertGreaterEqual(v["reader_with_writer"], 1)
            self.assertEqual(only(v, "reader_with_writer"), {})

    def test_a_reader_granted_after_the_writers_validity_ended_is_no_overlap(self):
        h = History()
        w, r = h.rw_client(1, "writer"), h.rw_client(2, "reader")
        h.rw_lock(1, w, 0, 10 * MS, token=1, until=500 * MS)  # never unlocked: it was valid until 500 ms
        h.rw_lock(2, r, 20 * MS, 510 * MS, token=2, until=1510 * MS)
        self.assertEqual(h.check()["reader_with_writer"], 0)

    def test_two_overlapping_writers_are_two_writers(self):
        h = History()
        w1, w2 = h.rw_client(1, "writer"), h.rw_client(2, "writer")
        h.rw_lock(1, w1, 0, 10 * MS, token=1, until=1000 * MS)
        h.rw_lock(2, w2, 20 * MS, 30 * MS, token=2, until=1030 * MS)
        v = h.check()
        self.assertEqual(v["two_writers"], 1)
        self.assertEqual(v["reader_with_writer"], 0)

    def test_a_reader_whose_token_is_not_above_an_earlier_writers_is_reported(self):
        h = History()
        w, r = h.rw_client(1, "writer"), h.rw_client(2, "reader")
        h.rw_hold(1, w, 0, token=7)
        h.rw_hold(2, r, 100 * MS, token=7)
        v = h.check()
        self.assertEqual(v["rw_token_not_increasing"], 1)
        self.assertEqual(only(v, "rw_token_not_increasing"), {})

    def test_a_writer_whose_token_is_not_above_an_earlier_readers_is_reported(self):
        h = History()
        r, w = h.rw_client(1, "reader"), h.rw_client(2, "writer")
        h.rw_hold(1, r, 0, token=9)
        h.rw_hold(2, w, 100 * MS, token=4)
        s = h.summary()
        self.assertEqual(s["violations"]["rw_token_not_increasing"], 1)
        self.assertEqual(s["examples"]["rw_token_not_increasing"][0]["earlier"]["role"], "reader")

    def test_a_writer_whose_token_is_not_above_an_earlier_writers_is_reported(self):
        h = History()
        w1, w2 = h.rw_client(1, "writer"), h.rw_client(2, "writer")
        h.rw_hold(1, w1, 0, token=5)
        h.rw_hold(2, w2, 100 * MS, token=3)
        self.assertEqual(h.check()["rw_token_not_increasing"], 1)

    def test_a_reader_that_fails_while_only_readers_held_is_a_liveness_violation(self):
        h = History()
        r1, r2 = h.rw_client(1, "reader"), h.rw_client(2, "reader")
        h.rw_hold(1, r1, 0, token=1, length=3000 * MS)
        h.rw_lock(2, r2, 20 * MS, 3020 * MS, token=0, until=0, ok=False)
        s = h.summary()
        self.assertEqual(s["violations"]["rw_liveness"], 1)
        self.assertEqual(s["examples"]["rw_liveness"][0]["why"], "idle")
        self.assertEqual(s["violations"]["liveness"], 0)

    def test_a_reader_that_fails_behind_a_writer_waiting_ahead_of_it_is_contention(self):
        h = History()
        r1, w, r2 = h.rw_client(1, "reader"), h.rw_client(2, "writer"), h.rw_client(3, "reader")
        h.rw_hold(1, r1, 0, token=1, length=3100 * MS)
        h.rw_lock(2, w, 10 * MS, 3020 * MS, token=0, until=0, ok=False)  # waits ahead of reader 3
        h.rw_lock(3, r2, 20 * MS, 3010 * MS, token=0, until=0, ok=False)
        s = h.summary()
        self.assertEqual(s["violations"]["rw_liveness"], 0)
        self.assertEqual(s["rw_liveness_by_fault"]["none"]["excused"], {"contention": 2})

    def test_a_writer_that_fails_while_readers_held_throughout_is_contention(self):
        h = History()
        r1, r2, w = h.rw_client(1, "reader"), h.rw_client(2, "reader"), h.rw_client(3, "writer")
        h.rw_hold(1, r1, 0, token=1, length=2000 * MS)
        h.rw_hold(2, r2, 1900 * MS, token=2, length=1500 * MS)
        h.rw_lock(3, w, 20 * MS, 3020 * MS, token=0, until=0, ok=False)
        self.assertEqual(h.check()["rw_liveness"], 0)


if __name__ == "__main__":
    unittest.main(verbosity=1)
