# The semaphore section's goal (issue 36 (c)): permits handed out fairly,
# Jain's index >= 0.95 over the processes' acquisitions at every k.
# scripts/bench --only-semaphore adds it to semaphore.json as `goals`, in
# the shape every results file uses (scripts/render-figures draws the
# README's table from it).
def r3: if . == null then null else (. * 1000 | round) / 1000 end;
def goal(name; measured; target):
  {goal: name, measured: (measured | r3), target: target, unit: "", op: ">=",
   met: (if measured == null then null else measured >= target end),
   margin_pct: (if measured == null then null else ((measured - target) / target * 100 | r3) end)};

. + {goals: [.ours.points[] |
  goal("semaphore fairness: Jain's index over \(.contenders) processes at k = \(.permits) >= 0.95"; .jain; 0.95)]}
