// Key rules and list pagination shared by the stores that implement listing themselves (the local
// folder and the in-memory fake), so both page exactly like S3's ListObjectsV2:
//   - items (objects and common prefixes) come in ascending byte order;
//   - a key whose remainder after the prefix contains the delimiter is folded into the common
//     prefix "prefix + remainder up to and including the delimiter", reported once;
//   - a page holds at most max_keys items (objects + common prefixes);
//   - next_token is the last item of the page and is set only if another item follows.
// Pure functions and a single-use builder; thread-compatible (no shared state).
#ifndef CAIRN_UFS_UFS_KEYS_H_
#define CAIRN_UFS_UFS_KEYS_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "ufs/ufs.h"

namespace cairn::ufs {

// The largest page a List returns; larger max_keys are clamped to it (as S3 does).
inline constexpr int kMaxListPage = 1000;

// OK if `key` is a portable object key: non-empty, no NUL byte, no leading '/', and no empty,
// "." or ".." component (hence no trailing '/' and no "//"). InvalidArgument naming the key
// otherwise. Portable keys map 1:1 onto POSIX paths below a root, which is what keeps a key from
// leaving the root of a local store.
Status ValidatePortableKey(std::string_view key);

// OK if `prefix` may be given to List on a portable store: empty, or components that are valid
// as above except the last, which may be empty (a trailing '/') or any partial name.
Status ValidatePortablePrefix(std::string_view prefix);

// InvalidArgument if options.max_keys < 1; otherwise the page size to use (<= kMaxListPage).
StatusOr<int> EffectivePageSize(const ListOptions& options);

// The smallest string greater than every string that starts with `prefix`, or "" if there is
// none (prefix empty or all bytes 0xff). Used to skip a whole common prefix in a sorted map.
std::string PrefixSuccessor(std::string_view prefix);

// Builds one List page from candidates offered in ascending key order. The caller stops offering
// as soon as a call returns kFull.
class ListPageBuilder {
 public:
  enum class Verdict {
    kTaken,    // Added to the page (or folded into a common prefix already on it).
    kSkipped,  // Not part of this page (before the continuation token, or outside the prefix).
    kFull,     // The page is complete and more items exist; next_token is set. Stop.
  };

  // `page_size` from EffectivePageSize(options). The builder copies what it needs.
  ListPageBuilder(const ListOptions& options, int page_size);

  // The common prefix `key` folds into under the options' prefix and delimiter, if any.
  std::optional<std::string> CommonPrefixOf(std::string_view key) const;

  // Offers an object key. If the key folds into a common prefix it is offered as that prefix
  // (and `stat` is not called). Otherwise, if the key belongs on the page, `stat` is called to
  // fill in its metadata; a nullopt from `stat` (the object vanished meanwhile) drops the key.
  Verdict AddObject(std::string_view key, const std::function<std::optional<ObjectInfo>()>& stat);

  // Offers a common prefix directly (a directory "a/b/" when the delimiter is "/"); it must end
  // with the delimiter and start with the options' prefix.
  Verdict AddPrefix(std::string_view common_prefix);

  // True once a call returned kFull.
  bool full() const { return full_; }

  // The page. Call once, after the last offer.
  ListResult Finish() &&;

 private:
  // Decides whether an item sorts after the continuation token and fits; kTaken means "add it".
  Verdict Admit(std::string_view item);

  std::string prefix_;
  std::string delimiter_;
  std::string token_;
  int page_size_;
  int taken_ = 0;
  bool full_ = false;
  std::string last_item_;  // Last object key or common prefix put on the page.
  ListResult result_;
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_UFS_KEYS_H_
