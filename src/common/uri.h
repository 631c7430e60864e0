// Parsing of under-storage URIs: "file:///abs/path", "s3://bucket/prefix".
#ifndef CAIRN_COMMON_URI_H_
#define CAIRN_COMMON_URI_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace cairn {

struct Uri {
  std::string scheme;     // "file", "s3" (lowercase).
  std::string authority;  // bucket for s3; empty for file.
  std::string path;       // without leading '/' for s3 (the prefix); absolute for file.
  std::string ToString() const;
};

// InvalidArgument on a missing "scheme://", an empty bucket, or a relative file path.
// Unknown schemes parse fine; the UFS factory rejects them with a clear message.
StatusOr<Uri> ParseUri(std::string_view text);

}  // namespace cairn

#endif  // CAIRN_COMMON_URI_H_
