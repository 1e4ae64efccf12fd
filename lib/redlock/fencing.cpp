// Fencing tokens: the maximum of the winners' counters, written back where
// it is missing (the proof is in fencing.hpp).

#include "redlock/fencing.hpp"

#include "redlock/mutex_rounds.hpp"
#include "redlock/script_answers.hpp"

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
  spec.send = script_sender(st, make_script_call(fence_script(), {st.name, record_key}, {value, token_text}));
  spec.classify = classify_fence;
  spec.quorum = st.eng.quorum() - votes.at_token;
  spec.excluded = votes.at_or_out;  // reported as "excluded": not written back
  run_round(st.eng, std::move(spec),
            [&eng = st.eng, at_token = votes.at_token, done = std::move(done)](tally&& written) {
              done(at_token + written.ok >= eng.quorum());
            });
}

}  // namespace redsync::detail
