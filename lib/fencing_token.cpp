// Printing a fencing token: its number, as the stream formats integers.

#include <redsync/fencing_token.hpp>

#include <ostream>

namespace redsync {

std::ostream& operator<<(std::ostream& out, fencing_token t) {
  return out << t.value;
}

}  // namespace redsync
