// AbsenceCachingUnderStorage: says "nothing is named K" without asking the source when a complete
// listing of K's folder, fetched through this wrapper less than `ttl` ago, does not name it, and
// nothing written through this wrapper since could have put it there.
//
// Why: a job that creates many new files in one folder (the shards of a checkpoint, `tar x`)
// made the worker ask the source two questions per new name before its first byte (a HEAD of the
// key, then a LIST of "key/" to rule out a directory), each a round trip to the lake that queues
// behind the uploads of the files before it. With this wrapper the folder is listed once per
// `ttl` and the new names cost nothing.
//
// What it answers itself, and only this:
// - Stat(key) -> NotFound, and a List of the prefix "key/" without a continuation token -> an
//   empty page, when the folder of `key` has a fresh, complete listing that holds no file and no
//   directory named like key's last component (or, without a listing of that folder, when the
//   folder itself is known absent the same way). A name the listing holds is always asked of
//   the source, so what exists is always described by the source, never by this cache.
// - Absence is up to `ttl` old for what others (other processes, tools writing to the bucket
//   directly) created meanwhile. Callers that act on it must stay safe when it is wrong: the
//   worker's creates commit conditionally on absence (docs/consistency.md).
// - What is written through this wrapper (StartWrite's commit, Delete, Rename, MakeDir,
//   RemoveDir) turns the names it touches, and the folders above them, into "ask the source"
//   before the request goes out and again when it returns (Rename and the directory calls also drop
//   the listings of every folder at or below the names), and a listing that was in flight meanwhile
//   is not kept.
//
// While the source cannot be reached (it answers Unavailable or DeadlineExceeded), and only
// when `outage_ttl` is set (the worker sets it for write-back mounts, whose files are kept on
// the worker until the source is back): listings up to `outage_ttl` old answer what they show.
// A name they do not hold is absent (Stat and any listing under it), and a name they show as
// a directory only is one (Stat: not an object; a probe of "name/" for one key, as lookups
// send: the directory exists; a longer listing of it fails). Names written through this wrapper
// since the listing answer nothing. So a job can create a file in a folder it wrote to before while
// the lake is down: the creates commit on the name still being absent, so a wrong answer sets the
// file aside, never overwrites. Once a question failed so, the questions listings can settle
// are answered at once for `outage_recheck` (the source is not asked first, which would cost
// its retries on every lookup); a question they cannot settle still asks, and any answer from
// the source (an object, NotFound, a listing) ends that at once.
//
// Where listings come from: List calls that pass through for a whole folder (delimiter "/", no
// continuation token), and, after a Stat that the source answered NotFound, one LIST of that
// folder (up to 1,000 names). A folder whose full page of 1,000 names had more is remembered as
// such for `ttl` (answers nothing, is not listed again); a shorter page that stopped early
// teaches nothing.
//
// Bounded: at most `max_folders` listings (the one that expires first is dropped), each of one
// page. Thread-safety: thread-safe; no lock is held while the source is asked.
#ifndef CAIRN_UFS_ABSENCE_CACHING_UFS_H_
#define CAIRN_UFS_ABSENCE_CACHING_UFS_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "ufs/ufs.h"

namespace cairn::ufs {

struct AbsenceCacheOptions {
  std::chrono::microseconds ttl{std::chrono::seconds(5)};
  // How old a listing may be to answer while the source cannot be reached; 0: never (above).
  std::chrono::microseconds outage_ttl{0};
  // How long after the source last failed a question (Unavailable, DeadlineExceeded) listings
  // answer without asking it first (with outage_ttl set).
  std::chrono::microseconds outage_recheck{std::chrono::seconds(5)};
  size_t max_folders = 256;
  // Called (without a lock held) for each question answered here, e.g. to count it in a metric.
  std::function<void()> on_absent_answer;
  // Likewise for each answered because the source could not be reached.
  std::function<void()> on_outage_answer;
};

class AbsenceCachingUnderStorage : public UnderStorageWrapper {
 public:
  // `clock` is not owned (null: Clock::Real()).
  AbsenceCachingUnderStorage(std::shared_ptr<UnderStorage> target, AbsenceCacheOptions options,
                             Clock* clock = nullptr);

  StatusOr<ObjectInfo> Stat(std::string_view key) override EXCLUDES(mu_);
  StatusOr<ListResult> List(const ListOptions& options) override EXCLUDES(mu_);
  StatusOr<std::unique_ptr<ObjectWriter>> StartWrite(std::string_view key,
                                                     const WriterOptions& options) override
      EXCLUDES(mu_);
  Status Delete(std::string_view key) override EXCLUDES(mu_);
  StatusOr<ObjectInfo> Rename(std::string_view from, std::string_view to,
                              const RenameOptions& options) override EXCLUDES(mu_);
  Status MakeDir(std::string_view key) override EXCLUDES(mu_);
  Status RemoveDir(std::string_view key) override EXCLUDES(mu_);

  struct Stats {
    uint64_t absent_answers = 0;    // Stats and probes answered here (no request).
    uint64_t folders_listed = 0;    // LISTs this wrapper sent itself (after a NotFound stat).
    uint64_t listings_kept = 0;     // Listings stored (passed through or its own).
    uint64_t listings_dropped = 0;  // Listings not kept: something was written meanwhile.
    uint64_t outage_answers = 0;    // Answered from older listings: the source was unreachable.
  };
  Stats stats() const EXCLUDES(mu_);

  // `key` (a file or directory name) was or is about to be changed at the source: it is asked
  // of the source from now on (public for the writers this wrapper hands out).
  void Touch(std::string_view key) EXCLUDES(mu_);

 private:
  struct Folder {
    std::unordered_set<std::string> names;  // Files and directories directly in the folder.
    std::unordered_set<std::string> files;  // Those listed as objects...
    std::unordered_set<std::string> dirs;   // ...as directories (or folders above a write).
    bool complete = false;                  // False: more than one page; answers nothing.
    int64_t listed_us = 0;
  };
  enum class OutageAnswer { kNone, kAbsent, kDirectory };
  // `key` and everything below it (a directory renamed or removed, or made).
  void TouchTree(std::string_view key) EXCLUDES(mu_);
  void TouchLocked(std::string_view key) REQUIRES(mu_);
  bool KnownAbsent(std::string_view key) EXCLUDES(mu_);
  // Whether listings newer than `max_age_us` show `key` absent.
  bool KnownAbsentLocked(std::string_view key, int64_t now_us, int64_t max_age_us) REQUIRES(mu_);
  // What listings up to outage_ttl old say of `key` when the source answered `status` (and
  // notes whether the source is down: see SourceAnswered).
  OutageAnswer AnswerInOutage(std::string_view key, const Status& status) EXCLUDES(mu_);
  // As AnswerInOutage, without asking the source, while it failed less than outage_recheck ago.
  OutageAnswer AnswerWhileDown(std::string_view key) EXCLUDES(mu_);
  OutageAnswer OutageAnswerLocked(std::string_view key, int64_t now_us) REQUIRES(mu_);
  // The source answered a question (`status` is not an outage's): it is up.
  void SourceAnswered(const Status& status) EXCLUDES(mu_);
  static bool IsOutage(const Status& status);
  // What a listing of "key/" (`options`) answers when the outage answer for key is `answer`;
  // nullopt: the listing must go to the source (or fail).
  static std::optional<ListResult> ListingFrom(OutageAnswer answer, const ListOptions& options);
  bool HasFreshListing(const std::string& folder) EXCLUDES(mu_);
  uint64_t BeginListing() EXCLUDES(mu_);
  void EndListing(uint64_t ticket, const std::string& folder, const ListResult* listed)
      EXCLUDES(mu_);
  void ListFolder(const std::string& folder) EXCLUDES(mu_);

  const AbsenceCacheOptions options_;
  Clock* const clock_;
  mutable Mutex mu_;
  std::map<std::string, Folder> folders_ GUARDED_BY(mu_);
  // Every touch moves the epoch on. A listing remembers the epoch it started at; it is kept only
  // if neither its folder (touched_) nor a tree above it (tree_touched_) was touched later.
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
  std::multiset<uint64_t> in_flight_ GUARDED_BY(mu_);        // Start epochs of listings under way.
  std::map<std::string, uint64_t> touched_ GUARDED_BY(mu_);  // While listings are in flight.
  uint64_t tree_touched_ GUARDED_BY(mu_) = 0;
  int64_t source_failed_us_ GUARDED_BY(mu_) = 0;  // When a question last failed; 0: answered.
  Stats stats_ GUARDED_BY(mu_);
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_ABSENCE_CACHING_UFS_H_
