// Printing of dispatch key sets.
#include "ferry/dispatch/dispatch_key_set.h"

#include <ostream>

namespace ferry {

std::string DispatchKeySet::str() const {
  std::string out = "DispatchKeySet(";
  bool first = true;
  for (DispatchKey k : *this) {
    if (!first) out += ", ";
    out += dispatch_key_name(k);
    first = false;
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& out, DispatchKeySet ks) { return out << ks.str(); }

}  // namespace ferry
