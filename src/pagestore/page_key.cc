#include <string>

#include "pagestore/page_store.h"

namespace cairn::pagestore {

std::string PageKey::Serialize() const {
  std::string out;
  out.reserve(object_id.size() + version.size() + 22);
  out += object_id;
  out += '\0';
  out += version;
  out += '\0';
  out += std::to_string(page_index);
  return out;
}

Hash128 PageKey::Id() const { return Hash128Of(Serialize()); }

}  // namespace cairn::pagestore
