// EditDocument: the read-modify-write of a cluster document kept under one etcd key (the mount
// table, the cache rules, the authorization policy), by compare-and-swap on the key's
// mod_revision, so that concurrent editors (two operators, two scripts) never lose an update:
// the loser reads again and re-applies its edit.
//
// Conflicts mean another editor just won; a randomised pause that keeps growing spreads a crowd
// of editors out until each finds a quiet moment (a single editor never waits).
//
// Thread-safety: as thread-safe as `coord` (the callbacks run on the calling thread).
#ifndef CAIRN_MEMBERSHIP_DOCUMENT_EDIT_H_
#define CAIRN_MEMBERSHIP_DOCUMENT_EDIT_H_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "common/status.h"
#include "membership/backoff.h"
#include "membership/coordination.h"

namespace cairn::membership {

inline constexpr int kDocumentEditAttempts = 20;

// Reads `key` (absent: a default-constructed Doc), decodes it with `decode` (its error is
// returned as is: a stored document that does not decode is not overwritten), applies `edit`
// (which may set *unchanged to skip the write), and writes `encode(doc)` if nobody wrote the
// key in between; otherwise starts over, up to kDocumentEditAttempts times.
// Errors: those of decode and edit, Unavailable (etcd), FailedPrecondition "<what>: edit still
// conflicting ..." when every attempt lost a race (nothing was written).
template <typename Doc>
Status EditDocument(Coordination* coord, std::string_view key, std::string_view what,
                    const std::function<Status(std::string_view stored, Doc* doc)>& decode,
                    const std::function<Status(Doc* doc, bool* unchanged)>& edit,
                    const std::function<std::string(const Doc& doc)>& encode) {
  Backoff backoff(std::chrono::milliseconds(2), std::chrono::milliseconds(1000));
  for (int attempt = 1; attempt <= kDocumentEditAttempts; ++attempt) {
    int64_t mod_revision = 0;  // 0 = the key must not exist yet.
    Doc doc{};
    StatusOr<KeyValue> kv = coord->Get(key);
    if (kv.ok()) {
      mod_revision = kv->mod_revision;
      CAIRN_RETURN_IF_ERROR(decode(kv->value, &doc));
    } else if (kv.status().code() != StatusCode::kNotFound) {
      return kv.status();
    }
    bool unchanged = false;
    CAIRN_RETURN_IF_ERROR(edit(&doc, &unchanged));
    if (unchanged) return Status::Ok();
    StatusOr<int64_t> written = coord->CompareAndSwap(key, mod_revision, encode(doc));
    if (written.ok()) return Status::Ok();
    if (written.status().code() != StatusCode::kFailedPrecondition) return written.status();
    if (attempt < kDocumentEditAttempts) std::this_thread::sleep_for(backoff.Next());
  }
  return FailedPreconditionError(std::string(what) + ": edit still conflicting after " +
                                 std::to_string(kDocumentEditAttempts) +
                                 " attempts (concurrent edits); nothing written, try again");
}

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_DOCUMENT_EDIT_H_
