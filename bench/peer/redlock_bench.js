// node-redlock (redlock 5.0.0-beta.2 over ioredis) measured the same way as
// redsync_bench, against the same nodes, in the same scripts/bench run:
// cycle, throughput, handover, degraded, failed_lock, contention. Prints one
// JSON object.
//
//   node bench/peer/redlock_bench.js --nodes redis://127.0.0.1:7101,... \
//     --only cycle,throughput [--iterations N] [--warmup N] [--duration-ms N]
//
// Settings: "default" is node-redlock's own (retryCount 10, retryDelay 200 ms,
// retryJitter 100 ms); "tuned" is retryDelay 10 ms, retryJitter 0 and
// retryCount 31, i.e. 32 tries 10 ms apart like redsync's tuned run. The lock
// duration is 8000 ms, redsync's default expiry. node-redlock always returns
// as soon as a quorum is reached or lost (it has no fail-fast switch) and
// ioredis has no command timeout unless one is configured.

import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import Redis from "ioredis";
import Redlock from "redlock";

const DURATION_MS = 8000;
const SETTINGS = {
  default: {},
  tuned: { retryDelay: 10, retryJitter: 0, retryCount: 31 },
};

function parseArgs(argv) {
  const cfg = {
    nodes: [],
    only: ["cycle", "throughput", "handover"],
    iterations: 2000,
    warmup: 200,
    durationMs: 3000,
    lockers: [1, 16, 64, 256],
    contenders: [2, 8, 32],
    contention: [2, 4, 8, 32, 64],
    label: "",
    capMs: 10000,
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    const ints = (s) => s.split(",").filter(Boolean).map(Number);
    if (a === "--nodes") cfg.nodes = v().split(",").filter(Boolean);
    else if (a === "--only") cfg.only = v().split(",").filter(Boolean);
    else if (a === "--iterations") cfg.iterations = Number(v());
    else if (a === "--warmup") cfg.warmup = Number(v());
    else if (a === "--duration-ms") cfg.durationMs = Number(v());
    else if (a === "--lockers") cfg.lockers = ints(v());
    else if (a === "--contenders") cfg.contenders = ints(v());
    else if (a === "--contention") cfg.contention = ints(v());
    else if (a === "--label") cfg.label = v();
    else if (a === "--cap-ms") cfg.capMs = Number(v());
    else if (a === "--json") continue;
    else throw new Error(`unknown argument '${a}'`);
  }
  if (cfg.nodes.length === 0) throw new Error("--nodes is required");
  return cfg;
}

// ---- helpers ------------------------------------------------------------------

const nowNs = () => process.hrtime.bigint();
const usSince = (t0) => Number(nowNs() - t0) / 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round3 = (x) => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : null);
let nameCounter = 0;
const uniqueName = (what) => `bench:peer:${what}:${process.pid}:${nameCounter++}`;

// Nearest-rank percentiles, as redsync_bench's stats.cpp.
function summary(us) {
  const s = Float64Array.from(us).sort();
  const pct = (p) => (s.length ? s[Math.min(Math.max(1, Math.ceil(p * s.length)), s.length) - 1] : 0);
  const mean = s.length ? s.reduce((a, b) => a + b, 0) / s.length : 0;
  return {
    n: s.length,
    median_us: round3(pct(0.5)),
    p99_us: round3(pct(0.99)),
    max_us: round3(pct(1)),
    mean_us: round3(mean),
    min_us: round3(pct(0)),
  };
}

function makeClients(cfg, extra = {}) {
  return cfg.nodes.map((uri) => {
    const u = new URL(uri);
    const c = new Redis({ host: u.hostname, port: Number(u.port || 6379), ...extra });
    c.on("error", () => {}); // reported through command results instead
    return c;
  });
}

const closeClients = (clients) => clients.forEach((c) => c.disconnect());

async function infoField(client, section, field) {
  const text = await client.info(section);
  const line = text.split("\r\n").find((l) => l.startsWith(`${field}:`));
  return line ? line.slice(field.length + 1) : "";
}

function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // f[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (Number(f[11]) + Number(f[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return 0;
  }
}

// CPU with microsecond resolution: this process's (process.cpuUsage, µs) and
// the sum over the nodes of INFO cpu's used_cpu_sys + used_cpu_user (s).
async function preciseCpu(clients) {
  let nodes = 0;
  for (const c of clients) {
    nodes += Number(await infoField(c, "cpu", "used_cpu_sys")) + Number(await infoField(c, "cpu", "used_cpu_user"));
  }
  const u = process.cpuUsage();
  return { self: u.user + u.system, nodes };
}

function cpuProbe(pids) {
  const t0 = nowNs();
  const self0 = process.cpuUsage();
  const nodes0 = pids.map(cpuSeconds);
  return () => {
    const wall = Number(nowNs() - t0) / 1e9;
    const self = process.cpuUsage(self0);
    const nodes = pids.map((p, i) => round3((100 * (cpuSeconds(p) - nodes0[i])) / wall));
    return {
      bench_cpu_pct: round3((100 * (self.user + self.system)) / 1e6 / wall),
      nodes_cpu_pct: nodes,
      nodes_cpu_pct_max: Math.max(...nodes),
      nodes_cpu_pct_sum: round3(nodes.reduce((a, b) => a + b, 0)),
    };
  };
}

// ---- measurements ---------------------------------------------------------------

// measureCpu: INFO cpu from every node before and after; off where nodes are
// frozen (their INFO would never answer, and ioredis has no timeout).
async function cycle(cfg, label = "", measureCpu = true) {
  const clients = makeClients(cfg);
  const redlock = new Redlock(clients);
  redlock.on("error", () => {});
  const name = uniqueName("cycle");
  const acquire = [];
  const release = [];
  const whole = [];
  let failures = 0;
  let cpu0 = null;
  for (let i = 0; i < cfg.warmup + cfg.iterations; i++) {
    if (i === cfg.warmup && measureCpu) cpu0 = await preciseCpu(clients);
    const t0 = nowNs();
    let lock;
    try {
      lock = await redlock.acquire([name], DURATION_MS);
    } catch {
      failures++;
    }
    const t1 = nowNs();
    if (lock) {
      try {
        await lock.release();
      } catch {
        failures++;
      }
    }
    const t2 = nowNs();
    if (i < cfg.warmup) continue;
    acquire.push(Number(t1 - t0) / 1000);
    release.push(Number(t2 - t1) / 1000);
    whole.push(Number(t2 - t0) / 1000);
  }
  const cpu1 = cpu0 ? await preciseCpu(clients) : null;
  closeClients(clients);
  const out = { acquire: summary(acquire), release: summary(release), cycle: summary(whole), failures };
  if (cpu0 && cfg.iterations > 0) {
    out.cpu_precise = {
      client_cpu_us_per_op: round3((cpu1.self - cpu0.self) / cfg.iterations),
      nodes_cpu_us_per_op: round3(((cpu1.nodes - cpu0.nodes) * 1e6) / cfg.iterations),
    };
  }
  if (label) out.state = label;
  return out;
}

async function throughputPoint(cfg, k, pids) {
  const clients = makeClients(cfg);
  const redlock = new Redlock(clients);
  redlock.on("error", () => {});
  let measuring = false;
  let stopping = false;
  let cycles = 0;
  let errors = 0;
  const latency = [];
  const locker = async () => {
    const name = uniqueName("tp");
    while (!stopping) {
      const t0 = nowNs();
      try {
        const lock = await redlock.acquire([name], DURATION_MS);
        await lock.release();
        if (measuring) {
          latency.push(usSince(t0));
          cycles++;
        }
      } catch {
        errors++;
      }
    }
  };
  const all = Promise.all(Array.from({ length: k }, locker));
  await sleep(cfg.durationMs / 10);
  const stop = cpuProbe(pids);
  const c0 = cycles;
  const t0 = nowNs();
  measuring = true;
  await sleep(cfg.durationMs);
  measuring = false;
  const secs = Number(nowNs() - t0) / 1e9;
  const c1 = cycles;
  const cpu = stop();
  stopping = true;
  await all;
  closeClients(clients);
  return {
    lockers: k,
    cycles_per_s: round3((c1 - c0) / secs),
    seconds: round3(secs),
    cycle: summary(latency),
    cpu,
    errors,
  };
}

async function throughput(cfg) {
  const admin = makeClients(cfg);
  const pids = await Promise.all(admin.map(async (c) => Number(await infoField(c, "server", "process_id"))));
  closeClients(admin);
  const points = [];
  for (const k of cfg.lockers) points.push(await throughputPoint(cfg, k, pids));
  return { points };
}

async function handoverPoint(cfg, admin, contenders, mode) {
  const clients = makeClients(cfg);
  const redlock = new Redlock(clients, SETTINGS[mode]);
  redlock.on("error", () => {});
  const name = uniqueName("handover");
  await admin.config("RESETSTAT");
  const log = {
    releasedAt: null,
    lastHolder: -1,
    waits: [],
    lockCalls: [],
    acquisitions: 0,
    handovers: 0,
    attempts: 0,
    failed: 0,
  };
  const start = nowNs();
  const end = start + BigInt(cfg.durationMs) * 1000000n;
  const contender = async (c) => {
    while (nowNs() < end) {
      const t0 = nowNs();
      let lock;
      try {
        lock = await redlock.acquire([name], DURATION_MS);
      } catch (e) {
        log.attempts += e && e.attempts ? e.attempts.length : 1;
        if (nowNs() < end) log.failed++;
        continue;
      }
      const now = nowNs();
      log.attempts += lock.attempts.length;
      log.lockCalls.push(Number(now - t0) / 1000);
      if (log.lastHolder >= 0 && log.lastHolder !== c) {
        log.handovers++;
        if (log.releasedAt !== null) log.waits.push(Number(now - log.releasedAt) / 1000);
      }
      log.lastHolder = c;
      log.releasedAt = null;
      log.acquisitions++;
      await sleep(1);
      log.releasedAt = nowNs();
      try {
        await lock.release();
      } catch {
        // counted by the next acquisition's wait
      }
    }
  };
  await Promise.all(Array.from({ length: contenders }, (_, c) => contender(c)));
  const secs = Number(nowNs() - start) / 1e9;
  const evalsha = await infoField(admin, "commandstats", "cmdstat_evalsha");
  const calls = Number((/calls=(\d+)/.exec(evalsha) || [0, 0])[1]);
  closeClients(clients);
  const handovers = Math.max(log.handovers, 1);
  return {
    contenders,
    retry_delay: mode === "tuned" ? "10ms (jitter 0, 32 tries)" : "default 200 ms +- 100 ms (11 tries)",
    settings: mode,
    acquisitions: log.acquisitions,
    handovers: log.handovers,
    acquisitions_per_s: round3(log.acquisitions / secs),
    handovers_per_s: round3(log.handovers / secs),
    wait: summary(log.waits),
    lock_call: summary(log.lockCalls),
    attempts_per_handover: round3(log.attempts / handovers),
    // node-redlock acquires and releases with EVALSHA: this counts both.
    node1_evalsha_per_handover: round3(calls / handovers),
    failed_locks: log.failed,
    seconds: round3(secs),
  };
}

async function handover(cfg) {
  const [admin] = makeClients({ nodes: [cfg.nodes[0]] });
  const points = [];
  for (const mode of ["default", "tuned"]) {
    for (const c of cfg.contenders) points.push(await handoverPoint(cfg, admin, c, mode));
  }
  admin.disconnect();
  return { points };
}

async function degraded(cfg) {
  return { state: cfg.label, default: await cycle(cfg, "", false) };
}

// One failed acquisition with no quorum possible. With ioredis' defaults
// (no command timeout) the votes of frozen nodes never arrive, so the call is
// capped at --cap-ms; with a 400 ms command timeout (redsync's default
// per-node timeout) it fails after retryCount + 1 attempts.
async function failedLockOnce(cfg, extra, capMs) {
  const clients = makeClients(cfg, extra);
  const redlock = new Redlock(clients);
  redlock.on("error", () => {});
  const t0 = nowNs();
  let outcome = "acquired";
  let attempts = 0;
  const attempt = redlock.acquire([uniqueName("failed")], DURATION_MS).then(
    (lock) => {
      attempts = lock.attempts.length;
      return "acquired";
    },
    (e) => {
      attempts = e && e.attempts ? e.attempts.length : 0;
      return "failed";
    },
  );
  outcome = await Promise.race([attempt, sleep(capMs).then(() => "no answer")]);
  const secs = Number(nowNs() - t0) / 1e9;
  closeClients(clients);
  return { outcome, attempts, seconds: round3(secs), cap_s: capMs / 1000 };
}

async function failedLock(cfg) {
  const tries = 11; // retryCount 10 + 1
  const noTimeout = await failedLockOnce(cfg, {}, cfg.capMs);
  const withTimeout = await failedLockOnce(cfg, { commandTimeout: 400 }, 60000);
  const bound = tries * (0.4 + 0.3);
  return {
    state: cfg.label,
    ioredis_default: { ...noTimeout, returned: noTimeout.outcome !== "no answer" },
    ioredis_command_timeout_400ms: {
      ...withTimeout,
      tries,
      bound_s: round3(bound),
      expected_s: round3(tries * 0.4 + (tries - 1) * 0.2),
      within_bound: withTimeout.outcome === "failed" && withTimeout.seconds <= bound,
    },
  };
}

// Contention, as redsync_bench's section: C contender processes (a pool of
// forked workers, each with its own ioredis clients and Redlock, started
// once), one name, a fixed window, hold ~0 or 1 ms, node-redlock's default
// retry settings and a 1-3 ms delay (retryDelay 2, retryJitter 1). A call
// that gives up after its retryCount is called again at once: the wait runs
// from wanting the lock to getting it. The figures are computed as
// tests/contention/contention_run.cpp's measure() computes them.
const CONTENTION_SETTINGS = {
  default: {},
  "1-3ms": { retryDelay: 2, retryJitter: 1 },
};

async function contenderWorker() {
  const clients = new Map();
  process.on("message", async (job) => {
    if (job.nodes && !clients.size) {
      for (const c of makeClients({ nodes: job.nodes })) clients.set(clients.size, c);
      await Promise.all([...clients.values()].map((c) => c.ping()));
      process.send({ ready: true });
      return;
    }
    if (job.exit) {
      closeClients([...clients.values()]);
      process.exit(0);
    }
    const redlock = new Redlock([...clients.values()], CONTENTION_SETTINGS[job.mode]);
    redlock.on("error", () => {});
    const start = BigInt(job.start);
    const stop = BigInt(job.stop);
    const out = { grants: [], failures: 0, unfinished: null };
    const lead = Number(start - nowNs()) / 1e6;
    if (lead > 0) await sleep(lead);
    while (nowNs() < stop) {
      const want = nowNs();
      let lock = null;
      while (!lock && nowNs() < stop) {
        try {
          lock = await redlock.acquire([job.name], DURATION_MS);
        } catch {
          if (nowNs() < stop) out.failures++;
        }
      }
      const acquired = nowNs();
      if (!lock || acquired >= stop) {
        // Cut by the window's end (a call's retries can run past it).
        out.unfinished = [String(want), String(stop)];
        if (lock) await lock.release().catch(() => {});
        break;
      }
      if (job.holdUs > 0) await sleep(job.holdUs / 1000);
      const released = nowNs();
      out.grants.push([String(want), String(acquired), String(released)]);
      try {
        await lock.release();
      } catch {
        // the next acquisition's wait shows it
      }
    }
    process.send(out);
  });
}

function measureContention(reports, start, stop) {
  const grants = [];
  const unfinished = [];
  reports.forEach((r, p) => {
    for (const [w, a, rel] of r.grants) grants.push({ p, want: BigInt(w), acq: BigInt(a), rel: BigInt(rel) });
    if (r.unfinished) unfinished.push({ want: BigInt(r.unfinished[0]), cut: BigInt(r.unfinished[1]) });
  });
  grants.sort((x, y) => (x.acq < y.acq ? -1 : x.acq > y.acq ? 1 : 0));
  const us = (d) => Number(d) / 1000;
  const earliest = new Array(grants.length);
  let pending = unfinished.reduce((m, u) => (u.want < m ? u.want : m), BigInt(Number.MAX_SAFE_INTEGER) * 1000n);
  for (let i = grants.length - 1; i >= 0; i--) {
    if (grants[i].want < pending) pending = grants[i].want;
    earliest[i] = pending;
  }
  let busyUntil = start;
  let gap = 0n;
  let handovers = 0;
  let overlaps = 0;
  const waits = [];
  const handoverWaits = [];
  grants.forEach((g, i) => {
    waits.push(us(g.acq - g.want));
    if (i > 0 && g.acq < busyUntil) overlaps++;
    const freeFrom = busyUntil > earliest[i] ? busyUntil : earliest[i];
    if (g.acq - freeFrom > gap) gap = g.acq - freeFrom;
    if (i > 0 && g.p !== grants[i - 1].p) {
      handovers++;
      handoverWaits.push(us(g.acq - grants[i - 1].rel));
    }
    if (g.rel > busyUntil) busyUntil = g.rel;
  });
  const wait = summary(waits);
  for (const u of unfinished) {
    wait.max_us = Math.max(wait.max_us, round3(us(u.cut - u.want)));
    const from = busyUntil > u.want ? busyUntil : u.want;
    if (u.cut - from > gap) gap = u.cut - from;
  }
  const shares = reports.map((r) => r.grants.filter(([, a]) => BigInt(a) <= stop).length);
  const sum = shares.reduce((a, b) => a + b, 0);
  const squares = shares.reduce((a, b) => a + b * b, 0);
  const secs = Number(stop - start) / 1e9;
  return {
    acquisitions: grants.length,
    handovers,
    acquisitions_per_s: round3(grants.length / secs),
    handovers_per_s: round3(handovers / secs),
    wait,
    handover_wait: summary(handoverWaits),
    longest_stall_ms: round3(Number(gap) / 1e6),
    jain: squares ? round3((sum * sum) / (shares.length * squares)) : 0,
    min_share: Math.min(...shares),
    max_share: Math.max(...shares),
    failed_calls: reports.reduce((a, r) => a + r.failures, 0),
    unfinished_waits: unfinished.length,
    overlaps,
    seconds: round3(secs),
  };
}

async function contention(cfg) {
  const size = Math.max(...cfg.contention);
  const self = fileURLToPath(import.meta.url);
  const workers = [];
  const ready = [];
  for (let i = 0; i < size; i++) {
    const w = fork(self, ["--contender-worker"], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
    workers.push(w);
    ready.push(new Promise((resolve) => w.once("message", resolve)));
    w.send({ nodes: cfg.nodes });
  }
  await Promise.all(ready);
  const points = [];
  for (const mode of ["default", "1-3ms"]) {
    for (const holdUs of [0, 1000]) {
      for (const c of cfg.contention) {
        const start = nowNs() + 50_000_000n;
        const stop = start + BigInt(cfg.durationMs) * 1_000_000n;
        const job = { name: uniqueName("contention"), mode, holdUs, start: String(start), stop: String(stop) };
        const reports = await Promise.all(
          workers.slice(0, c).map(
            (w) =>
              new Promise((resolve) => {
                w.once("message", resolve);
                w.send(job);
              }),
          ),
        );
        points.push({ contenders: c, hold_us: holdUs, retry_delay: mode, ...measureContention(reports, start, stop) });
      }
    }
  }
  for (const w of workers) w.send({ exit: true });
  return {
    processes: "one per contender (a forked worker with its own ioredis clients and Redlock)",
    window_ms: cfg.durationMs,
    points,
  };
}

// ---- main -------------------------------------------------------------------------

const RUNS = { cycle, throughput, handover, degraded, failed_lock: failedLock, contention };

async function main() {
  if (process.argv[2] === "--contender-worker") {
    await contenderWorker();
    return;
  }
  let cfg;
  try {
    cfg = parseArgs(process.argv);
  } catch (e) {
    process.stderr.write(`redlock_bench: ${e.message}\n`);
    process.exit(2);
  }
  const out = {};
  for (const name of cfg.only) {
    if (!RUNS[name]) throw new Error(`unknown measurement '${name}'`);
    process.stderr.write(`redlock_bench: ${name} ...\n`);
    out[name] = await RUNS[name](cfg);
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
  // Commands parked on frozen nodes keep sockets open: do not wait for them.
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`redlock_bench: ${e.stack || e}\n`);
  process.exit(1);
});
