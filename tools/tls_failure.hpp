// TLS failures that retrying cannot fix, told apart from outages by the
// words the library (lib/transport/tls_session.cpp) and tls_link use, with
// what to do about each. `lock` gives up on them as on refused credentials;
// `ping` and `status` count them as refusals. Pure, except speaks_tls.
#pragma once

#include <redsync/options.hpp>

#include <chrono>
#include <string>
#include <string_view>

namespace redsync::cli {

/// True for a failed certificate verification (unknown CA, name mismatch,
/// expired), a server that demands a client certificate, and a plaintext
/// redis:// URI that reaches a TLS port (worded by plaintext_to_tls).
bool is_tls_refusal(std::string_view message);

/// What to do about a TLS refusal, e.g. "use --tls-ca FILE with the CA that
/// signed the servers' certificates"; empty for other messages.
std::string tls_hint(std::string_view message);

/// `message` followed by its hint, as "MESSAGE; HINT" (just `message` when
/// there is none).
std::string with_tls_hint(const std::string& message);

/// True when `message` (a plaintext connection's failure) is what a TLS port
/// does to plaintext: reset the connection, close it, or answer bytes that
/// are no RESP.
bool may_be_tls_port(std::string_view message);

/// The message for a redis:// node whose port speaks TLS.
std::string plaintext_to_tls(const node_options& node, std::string_view original);

}  // namespace redsync::cli
