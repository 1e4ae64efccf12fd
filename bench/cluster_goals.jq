# The cluster section's goals (issues 24 and 32), computed from the
# section's own measurements: scripts/bench --only-cluster adds them to
# cluster.json as `goals`, in the shape every results file uses
# (scripts/render-figures draws the README's table from it).
def r3: if . == null then null else (. * 1000 | round) / 1000 end;
def ratio(a; b): if a == null or b == null or b == 0 then null else (a / b | r3) end;
def goal(name; measured; op; target; unit):
  {goal: name, measured: (measured | r3), target: target, unit: unit, op: op,
   met: (if measured == null then null elif op == "<=" then measured <= target else measured >= target end),
   margin_pct: (if measured == null then null
                elif op == "<=" then ((target - measured) / target * 100 | r3)
                else ((measured - target) / target * 100 | r3) end)};
def tp(k; kind): .throughput[] | select(.members == kind and .point.lockers == k) | .point;

.ours as $o | $o.cycle as $c | $o.replicas as $r |
. + {goals: [
  goal("cluster members: blocking cycle median <= 1.5 x standalone";
       ratio($c.cluster.cycle.median_us; $c.standalone.cycle.median_us); "<="; 1.5; "x standalone"),
  goal("cluster members: servers' CPU per cycle <= 1.5 x standalone (every cluster server)";
       ratio($c.cluster.cpu.nodes_cpu_us_per_op; $c.standalone.cpu.nodes_cpu_us_per_op); "<="; 1.5; "x standalone"),
  goal("cluster members: throughput at 64 lockers >= 0.8 x standalone";
       ratio(($o | tp(64; "cluster")).cycles_per_s; ($o | tp(64; "standalone")).cycles_per_s); ">="; 0.8; "x standalone"),
  goal("cluster members with a replica per master: blocking cycle median <= 2 x standalone";
       ratio($r.cluster.cycle.median_us; $r.standalone.cycle.median_us); "<="; 2; "x standalone"),
  goal("cluster members with a replica per master: masters' CPU per cycle <= 1.5 x standalone";
       ratio($r.cluster.cpu.nodes_cpu_us_per_op; $r.standalone.cpu.nodes_cpu_us_per_op); "<="; 1.5; "x standalone")
]}
