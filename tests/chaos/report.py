"""What a run prints and leaves behind: one summary line, summary.json and
summary.md."""

import json
import os


def _counts(d):
    return " ".join("%s=%d" % (k, d[k]) for k in sorted(d)) or "none"


def summary_line(s):
    o = s["operations"]
    return ("chaos %s: seed %d, %d s, %d lock calls (%.0f%% acquired), %d semaphore acquisitions (%.0f%% "
            "acquired), %d read-write lock calls (%.0f%% acquired), %d grants, %d redsync-lock runs; faults: %s; "
            "violations: %s" % (
                s["config"], s["seed"], s["duration_s"], o["lock_calls"], 100 * o["liveness"],
                o.get("acquire_calls", 0), 100 * o.get("semaphore_liveness", 0), o.get("rw_lock_calls", 0),
                100 * o.get("rw_liveness", 0), o["grants"],
                o["cli_runs"], _counts(s["faults"]), _counts(s["violations"])) + _cluster_line(s))


def _cluster_line(s):
    c = s.get("cluster")
    if not c:
        return ""
    return ("; cluster members: %d failovers + %d reshardings injected, %d of %d lagging promotions lost writes, "
            "%d faults went wrong" % (c["failovers"], c["reshards"], c["lagging_promotions_that_lost_writes"],
                                       c["lagging_promotions"], c["errors"]))


def _liveness_table(lv, calls):
    rows = ["", "| fault | %s | acquired | liveness | failed, excused | **violations** |" % calls,
            "| --- | --- | --- | --- | --- | --- |"]
    for k in sorted(lv, key=lambda k: (k != "none", k)):
        r = lv[k]
        rows.append("| %s | %d | %d | %.1f%% | %s | **%d** |" % (
            k, r["lock_calls"], r["acquired"], 100 * r["liveness"], _counts(r["excused"]), r["violations"]))
    return rows


def markdown(s):
    o, ob = s["operations"], s["observed"]
    rows = [
        "## Chaos run `%s`, seed %d, %d s" % (s["config"], s["seed"], s["duration_s"]),
        "",
        "| what | count |",
        "| --- | --- |",
        "| lock calls (library clients) | %d |" % o["lock_calls"],
        "| acquired (liveness) | %d (%.1f%%) |" % (o["lock_ok"], 100 * o["liveness"]),
        "| semaphore acquisitions (%s) | %d |" % (
            ", ".join("`%s`, k = %d" % kv for kv in sorted(o.get("semaphores", {}).items())) or "none",
            o.get("acquire_calls", 0)),
        "| acquired (semaphore liveness) | %d (%.1f%%) |" % (o.get("acquire_ok", 0),
                                                          100 * o.get("semaphore_liveness", 0)),
        "| read-write lock calls (%s) | %d (%d reader grants, %d writer grants) |" % (
            ", ".join("`%s`" % n for n in o.get("rw_names", [])) or "none", o.get("rw_lock_calls", 0),
            o.get("rw_reader_grants", 0), o.get("rw_writer_grants", 0)),
        "| acquired (read-write liveness) | %d (%.1f%%) |" % (o.get("rw_lock_ok", 0), 100 * o.get("rw_liveness", 0)),
        "| grants (library, semaphore, read-write and `redsync lock`) | %d |" % o["grants"],
        "| `redsync lock` runs | %d (exit statuses: %s) |" % (o["cli_runs"], _counts(o["cli_exit_status"])),
        "| fencing enforced by the resource | %s |" % ("yes" if s["fencing_enforced"] else "no (meta-test)"),
    ]
    c = s.get("cluster")
    if c:
        rows += [
            "| cluster members | %d, each %d masters with %d replica each, cluster-node-timeout %d ms |" % (
                c["members"], c["masters_per_member"], c["replicas_per_master"], c["cluster_node_timeout_ms"]),
            "| **failovers + reshardings injected** | **%d** (%d failovers, %d reshardings) |" % (
                c["failovers"] + c["reshards"], c["failovers"], c["reshards"]),
            "| a whole member down and back empty | %d |" % c["whole_member_down"],
            "| lagging promotions that lost writes (replication bytes) | %d of %d%s |" % (
                c["lagging_promotions_that_lost_writes"], c["lagging_promotions"],
                " (lagging and partitions need root: skipped)" if c["lagging_needs_root"] else ""),
            "| cluster faults that went wrong (the member recovered, or was formed again) | %d |" % c["errors"],
        ]
        if "partitioned_promotions" in c:
            rows += [
                "| partitioned masters replaced that lost writes (replication bytes) | %d of %d |" % (
                    c["partitioned_promotions_that_lost_writes"], c["partitioned_promotions"]),
                "| partitioned masters answering CLUSTERDOWN once replaced | %d of %d |" % (
                    c["partitioned_masters_answering_clusterdown"], c["partitioned_promotions"]),
            ]
    for k in sorted(s["faults"]):
        rows.append("| fault: %s | %d |" % (k, s["faults"][k]))
    for k in sorted(s["skipped_faults"]):
        rows.append("| fault skipped: %s | %d |" % (k, s["skipped_faults"][k]))
    for k in sorted(ob):
        rows.append("| observed: %s | %d |" % (k.replace("_", " "), ob[k]))
    for k in sorted(s["violations"]):
        rows.append("| **violation: %s** | **%d** |" % (k.replace("_", " "), s["violations"][k]))
    lv = s.get("liveness_by_fault") or {}
    if lv:
        rows += ["", "Liveness per fault kind (library lock calls that overlapped a fault of that kind; a call "
                 "overlapping several counts under each; a failure is excused when a quorum was touched, its "
                 "process or a holder of the name was stopped or gone, or it was contention within its bound):"]
        rows += _liveness_table(lv, "lock calls")
    sl = s.get("semaphore_liveness_by_fault") or {}
    if sl:
        rows += ["", "Semaphore liveness per fault kind (acquisitions that overlapped a fault of that kind; a "
                 "failure is excused when fewer than a quorum of nodes were untouched by faults until one expiry "
                 "after their heal, its process or a holder was stopped or gone, or others held every permit "
                 "but for short hand-over gaps):"]
        rows += _liveness_table(sl, "acquisitions")
    rl = s.get("rw_liveness_by_fault") or {}
    if rl:
        rows += ["", "Read-write lock liveness per fault kind (readers' and writers' lock calls that overlapped a "
                 "fault of that kind; a failure is excused as for a lock call, what holds a reader back being "
                 "the writers holding or waiting ahead of it):"]
        rows += _liveness_table(rl, "lock calls")
    if o.get("rw_lock_errors"):
        rows.append("")
        rows.append("Failed read-write lock calls by error: " + ", ".join(
            "%s: %d" % (k, n) for k, n in sorted(o["rw_lock_errors"].items())))
    if o.get("acquire_errors"):
        rows.append("")
        rows.append("Failed semaphore acquisitions by error: " + ", ".join(
            "%s: %d" % (k, n) for k, n in sorted(o["acquire_errors"].items())))
    if o["lock_errors"]:
        rows.append("")
        rows.append("Failed lock calls by error: " + ", ".join(
            "%s: %d" % (k, n) for k, n in sorted(o["lock_errors"].items())))
    return "\n".join(rows) + "\n"


def write(run_dir, summaries):
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump(summaries, f, indent=2)
    with open(os.path.join(run_dir, "summary.md"), "w") as f:
        f.write("\n".join(markdown(s) for s in summaries))
