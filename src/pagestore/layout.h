// DirLayout: where things live inside one cache folder (format version 1).
//
//   <root>/LOCK                 advisory lock: one page store per folder at a time
//   <root>/v1/                  everything of format version 1
//   <root>/v1/ab/<32 hex>       the page whose PageKey::Id() is that hex; "ab" = its first byte
//   <root>/v1/ab/<32 hex>.tmp-<16 hex nonce>-<n>   a page being written by the store whose
//                                                  instance nonce that is
//
// File names come only from the 128-bit id, never from object keys, so no key (with '/', '..',
// unicode, NUL, ...) can name a path outside the folder or collide with the layout.
// Pure code; thread-safe.
#ifndef CAIRN_PAGESTORE_LAYOUT_H_
#define CAIRN_PAGESTORE_LAYOUT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/checksum.h"

namespace cairn::pagestore {

inline constexpr int kSubdirCount = 256;

class DirLayout {
 public:
  explicit DirLayout(std::string root);

  const std::string& root() const { return root_; }
  std::string LockPath() const { return root_ + "/LOCK"; }
  std::string VersionDir() const { return root_ + "/v1"; }
  // The sub-folder with index `subdir` (0..255): "<root>/v1/0a".
  std::string SubdirPath(int subdir) const;
  std::string PagePath(const Hash128& id) const;
  std::string TempPath(const Hash128& id, uint64_t nonce, uint64_t sequence) const;

  // The sub-folder index of a page: the first byte of its hex name.
  static int SubdirOf(const Hash128& id) { return static_cast<int>(id.high >> 56); }

  enum class NameKind { kPage, kTemp, kOther };
  struct ParsedName {
    NameKind kind = NameKind::kOther;
    Hash128 id;          // kPage and kTemp.
    uint64_t nonce = 0;  // kTemp.
  };
  // Classifies a file name found in a sub-folder.
  static ParsedName ParseName(std::string_view name);

 private:
  std::string root_;
};

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_LAYOUT_H_
