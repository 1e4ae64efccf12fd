// RESP codec: exact encoding bytes and the reader's parsing of every RESP2
// reply kind, fed whole and split at every byte.
#include <doctest/doctest.h>

#include "transport/node_pool.hpp"
#include "transport/resp.hpp"

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using redsync::detail::encode_command;
using redsync::detail::reply;
using redsync::detail::resp_reader;
using namespace std::string_literals;

namespace {

// Feeds `wire` in two parts split at `cut` and collects every reply.
std::vector<reply> parse_split(const std::string& wire, std::size_t cut) {
  resp_reader reader;
  std::vector<reply> out;
  auto drain = [&] {
    reply r;
    for (;;) {
      const auto st = reader.next(r);
      REQUIRE(st != resp_reader::status::protocol_error);
      if (st == resp_reader::status::incomplete) break;
      out.push_back(r);
    }
  };
  REQUIRE(reader.feed(wire.data(), cut));
  drain();
  REQUIRE(reader.feed(wire.data() + cut, wire.size() - cut));
  drain();
  return out;
}

reply parse_one(const std::string& wire) {
  auto all = parse_split(wire, wire.size());
  REQUIRE(all.size() == 1);
  return all.front();
}

}  // namespace

TEST_SUITE_BEGIN("resp");

TEST_CASE("encode_command writes a RESP multi-bulk request with exact lengths") {
  auto wire = encode_command({"SET", "key", "value", "PX", "8000", "NX"});
  CHECK(*wire == "*6\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n$2\r\nPX\r\n$4\r\n8000\r\n$2\r\nNX\r\n");
}

TEST_CASE("encode_command keeps binary arguments, CRLF and empty strings intact") {
  const std::string binary = "a\0b\r\nc"s;
  auto wire = encode_command({"GET", binary, std::string_view()});
  CHECK(*wire == "*3\r\n$3\r\nGET\r\n$6\r\na\0b\r\nc\r\n$0\r\n\r\n"s);
}

TEST_CASE("encode_command handles more arguments than fit on the stack") {
  std::vector<std::string> args;
  std::vector<std::string_view> argv{"DEL"};
  for (int i = 0; i < 40; ++i) args.push_back("k" + std::to_string(i));
  for (const auto& a : args) argv.push_back(a);
  auto wire = encode_command(argv);
  CHECK(wire->rfind("*41\r\n$3\r\nDEL\r\n$2\r\nk0\r\n", 0) == 0);
  CHECK(wire->size() > 41 * 6);
  CHECK(wire->substr(wire->size() - 9) == "$3\r\nk39\r\n");
}

TEST_CASE("encode_command writes exactly the bytes of hiredis' redisFormatCommandArgv") {
  // Our encoder replaced hiredis' formatter (issue 34): the wire must not change.
  std::mt19937 rng(34);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::string> args(rng() % 40);
    for (auto& a : args) {
      a.resize(rng() % 3 == 0 ? rng() % 300 : rng() % 12);
      for (auto& c : a) c = static_cast<char>(rng());
    }
    std::vector<std::string_view> argv(args.begin(), args.end());
    std::vector<const char*> ptrs;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    char* theirs = nullptr;
    const auto len = redisFormatCommandArgv(&theirs, static_cast<int>(args.size()), ptrs.data(), lens.data());
    REQUIRE(len >= 0);
    const std::string expected(theirs, static_cast<std::size_t>(len));
    redisFreeCommand(theirs);
    CHECK(*encode_command(argv) == expected);
    std::string appended = "prefix";
    redsync::detail::append_command(appended, argv);
    CHECK(appended == "prefix" + expected);
  }
}

TEST_CASE("reader parses status, error, integer, bulk string and nil replies") {
  auto s = parse_one("+OK\r\n");
  CHECK(s.type == reply::kind::status);
  CHECK(s.str == "OK");

  auto e = parse_one("-WRONGPASS invalid username-password pair\r\n");
  CHECK(e.type == reply::kind::error);
  CHECK(e.is_error());
  CHECK(e.str == "WRONGPASS invalid username-password pair");

  auto i = parse_one(":-42\r\n");
  CHECK(i.type == reply::kind::integer);
  CHECK(i.integer == -42);

  auto b = parse_one("$5\r\nh\0\r\nx\r\n"s);
  CHECK(b.type == reply::kind::string);
  CHECK(b.str == "h\0\r\nx"s);

  auto empty = parse_one("$0\r\n\r\n");
  CHECK(empty.type == reply::kind::string);
  CHECK(empty.str.empty());

  CHECK(parse_one("$-1\r\n").type == reply::kind::nil);
  CHECK(parse_one("*-1\r\n").type == reply::kind::nil);
}

TEST_CASE("reader parses nested arrays with mixed element kinds") {
  auto r = parse_one("*3\r\n:1\r\n*2\r\n$3\r\nfoo\r\n$-1\r\n*0\r\n");
  REQUIRE(r.type == reply::kind::array);
  REQUIRE(r.elements.size() == 3);
  CHECK(r.elements[0].type == reply::kind::integer);
  CHECK(r.elements[0].integer == 1);
  REQUIRE(r.elements[1].type == reply::kind::array);
  REQUIRE(r.elements[1].elements.size() == 2);
  CHECK(r.elements[1].elements[0].str == "foo");
  CHECK(r.elements[1].elements[1].type == reply::kind::nil);
  CHECK(r.elements[2].type == reply::kind::array);
  CHECK(r.elements[2].elements.empty());
}

TEST_CASE("reader yields the same replies however the stream is split") {
  const std::string wire = "+OK\r\n-ERR x\r\n:7\r\n$3\r\nabc\r\n$-1\r\n*2\r\n*1\r\n+a\r\n:9\r\n";
  for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
    CAPTURE(cut);
    auto all = parse_split(wire, cut);
    REQUIRE(all.size() == 6);
    CHECK(all[0].str == "OK");
    CHECK(all[1].is_error());
    CHECK(all[2].integer == 7);
    CHECK(all[3].str == "abc");
    CHECK(all[4].type == reply::kind::nil);
    REQUIRE(all[5].elements.size() == 2);
    CHECK(all[5].elements[0].elements[0].str == "a");
    CHECK(all[5].elements[1].integer == 9);
  }
}

TEST_CASE("reader reports incomplete input until the reply is whole, one byte at a time") {
  const std::string wire = "*2\r\n$5\r\nhello\r\n:12345\r\n";
  resp_reader reader;
  reply r;
  for (std::size_t i = 0; i + 1 < wire.size(); ++i) {
    REQUIRE(reader.feed(&wire[i], 1));
    CHECK(reader.next(r) == resp_reader::status::incomplete);
  }
  REQUIRE(reader.feed(&wire.back(), 1));
  REQUIRE(reader.next(r) == resp_reader::status::reply);
  CHECK(r.elements[0].str == "hello");
  CHECK(r.elements[1].integer == 12345);
  CHECK(reader.next(r) == resp_reader::status::incomplete);
}

TEST_CASE("reader reports a protocol error for an unknown type byte and stays failed") {
  resp_reader reader;
  const std::string bad = "+OK\r\n!oops\r\n";
  REQUIRE(reader.feed(bad.data(), bad.size()));
  reply r;
  REQUIRE(reader.next(r) == resp_reader::status::reply);
  CHECK(r.str == "OK");
  CHECK(reader.next(r) == resp_reader::status::protocol_error);
  CHECK_FALSE(reader.error().empty());
  CHECK(reader.next(r) == resp_reader::status::protocol_error);
  CHECK_FALSE(reader.feed("+OK\r\n", 5));
}

TEST_CASE("reader refuses a reply declaring more elements than any reply it reads, before allocating them") {
  // Found by tests/fuzz/reply_fuzz.cpp: hiredis allocated 8 bytes per
  // declared element at once (here 2.7 GB, and 16 GiB for *2147483647).
  for (const std::string& wire : {"*333333331\r\n"s, "*2147483647\r\n"s, "*65537\r\n"s}) {
    CAPTURE(wire);
    resp_reader reader;
    REQUIRE(reader.feed(wire.data(), wire.size()));
    reply r;
    CHECK(reader.next(r) == resp_reader::status::protocol_error);
    CHECK(reader.error() == "a reply of more than 65536 elements");
  }
}

TEST_CASE("reader counts the elements of nested arrays together, and afresh for each reply") {
  auto array_of_ones = [](std::size_t n) {
    std::string wire = "*" + std::to_string(n) + "\r\n";
    for (std::size_t i = 0; i < n; ++i) wire += ":1\r\n";
    return wire;
  };
  // Two replies of exactly the limit each.
  const std::string two = array_of_ones(65536) + "*2\r\n" + array_of_ones(40000) + array_of_ones(25534);
  auto all = parse_split(two, two.size());
  REQUIRE(all.size() == 2);
  CHECK(all[0].elements.size() == 65536);
  CHECK(all[1].elements[1].elements.size() == 25534);

  // One reply whose arrays declare 65537 elements in all.
  const std::string over = "*2\r\n" + array_of_ones(40000) + "*25535\r\n";
  resp_reader reader;
  REQUIRE(reader.feed(over.data(), over.size()));
  reply r;
  CHECK(reader.next(r) == resp_reader::status::protocol_error);
}

TEST_SUITE_END();
