// Fencing tokens: the maximum of the winners' counters, written back where
// it is missing (the proof is in fencing.hpp).

#include "redlock/mutex/fencing.hpp"

#include "redlock/mutex/mutex_rounds.hpp"
#include "redlock/scripts/script_answers.hpp"

#include <algorithm>
#include <string>

namespace redsync::detail {

token_votes count_token_votes(const tally& t, std::size_t nodes) {
  token_votes v;
  for (std::size_t i = 0; i < nodes; ++i)
    if (t.nodes[i].status == node_status::ok) v.token = std::max<std::int64_t>(v.token, t.integers[i]);
  v.at_or_out.assign(nodes, true);
  for (std::size_t i = 0; i < nodes; ++i) {
    if (t.nodes[i].status != node_status::ok) continue;
    if (t.integers[i] == v.token)
      ++v.at_token;
    else
      v.at_or_out[i] = false;
  }
  return v;
}

void write_back_token(mutex_state& st, std::string_view value, const token_votes& votes,
                      std::function<void(bool)> done) {
  const std::string token_text = std::to_string(votes.token);
  round_spec spec;
  // One fence call per slot group on a cluster member: every rec(m, s) of
  // the lock's slots is raised, and the member counts only if all were
  // (cluster_keys.hpp, "Tokens").
  spec.send = script_sender(st, st.call(st.scripts.fence, &lock_keys::fence_keys, {value, token_text}, false),
                            classify_fence);
  spec.classify = classify_fence;
  spec.slot = st.slot;
  write_back_token(st.eng, std::move(spec), st.eng.quorum(), votes, std::move(done));
}

void write_back_token(engine& eng, round_spec spec, std::size_t quorum, const token_votes& votes,
                      std::function<void(bool)> done) {
  spec.quorum = quorum - votes.at_token;
  spec.excluded = votes.at_or_out;  // reported as "excluded": not written back
  spec.excluded_why.clear();
  spec.fail_fast = false;
  spec.exclude_yes = nullptr;
  run_round(eng, std::move(spec),
            [quorum, at_token = votes.at_token, done = std::move(done)](tally&& written) {
              done(at_token + written.ok >= quorum);
            });
}

}  // namespace redsync::detail
