#include "ufs/absence_caching_ufs.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace cairn::ufs {
namespace {

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> SplitKey(std::string_view key) {
  const size_t slash = key.rfind('/');
  if (slash == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

// The folder a whole-folder listing's prefix names ("a/b/" -> "a/b", "" -> ""), or nullopt.
std::optional<std::string> FolderOfPrefix(std::string_view prefix) {
  if (prefix.empty()) return std::string();
  if (prefix.size() < 2 || prefix.back() != '/') return std::nullopt;
  return std::string(prefix.substr(0, prefix.size() - 1));
}

bool Below(std::string_view key, std::string_view tree) {
  return key == tree || (key.size() > tree.size() && key.substr(0, tree.size()) == tree &&
                         key[tree.size()] == '/');
}

// Tells the wrapper when the object it writes appears (or failed to).
class TouchingWriter : public ObjectWriterWrapper {
 public:
  TouchingWriter(std::unique_ptr<ObjectWriter> target, AbsenceCachingUnderStorage* store,
                 std::string key)
      : ObjectWriterWrapper(std::move(target)), store_(store), key_(std::move(key)) {}
  StatusOr<ObjectInfo> Commit(uint64_t size, std::span<const char> tail) override {
    StatusOr<ObjectInfo> committed = ObjectWriterWrapper::Commit(size, tail);
    store_->Touch(key_);
    return committed;
  }

 private:
  AbsenceCachingUnderStorage* const store_;  // Outlives its writers (ufs.h).
  const std::string key_;
};

}  // namespace

AbsenceCachingUnderStorage::AbsenceCachingUnderStorage(std::shared_ptr<UnderStorage> target,
                                                       AbsenceCacheOptions options, Clock* clock)
    : UnderStorageWrapper(std::move(target)),
      options_(options),
      clock_(clock != nullptr ? clock : Clock::Real()) {}

StatusOr<ObjectInfo> AbsenceCachingUnderStorage::Stat(std::string_view key) {
  if (KnownAbsent(key)) return NotFoundError("no such object: " + std::string(key));
  if (AnswerWhileDown(key) != OutageAnswer::kNone) {
    return NotFoundError("no object " + std::string(key) +
                         " in the last listing of its folder (the source was unreachable "
                         "moments ago)");
  }
  StatusOr<ObjectInfo> info = UnderStorageWrapper::Stat(key);
  SourceAnswered(info.status());
  if (!info.ok() && info.status().code() == StatusCode::kNotFound) {
    // A name looked up and not found is often about to be created, next to others: list its
    // folder once, which also answers the directory probe that usually follows.
    std::string folder = SplitKey(key).first;
    if (!HasFreshListing(folder)) ListFolder(folder);
  }
  if (!info.ok() && AnswerInOutage(key, info.status()) != OutageAnswer::kNone) {
    return NotFoundError("no object " + std::string(key) +
                         " in the last listing of its folder (the source is unreachable: " +
                         info.status().message() + ")");
  }
  return info;
}

StatusOr<ListResult> AbsenceCachingUnderStorage::List(const ListOptions& options) {
  // The key of the directory a first-page listing of "key/" asks about, if it is one.
  std::optional<std::string_view> dir;
  if (options.continuation_token.empty() && options.prefix.size() > 1 &&
      options.prefix.back() == '/') {
    dir = std::string_view(options.prefix.data(), options.prefix.size() - 1);
  }
  if (dir && KnownAbsent(*dir)) return ListResult{};  // Nothing under a directory not there.
  if (dir) {
    if (std::optional<ListResult> answer = ListingFrom(AnswerWhileDown(*dir), options)) {
      return *answer;
    }
  }
  std::optional<std::string> folder;
  if (options.continuation_token.empty() && options.delimiter == "/") {
    folder = FolderOfPrefix(options.prefix);
  }
  const uint64_t ticket = folder ? BeginListing() : 0;
  StatusOr<ListResult> listed = UnderStorageWrapper::List(options);
  SourceAnswered(listed.status());
  if (folder) {
    // A short page of a folder says nothing about its size: only a full page (1,000 names, what
    // clients and this wrapper ask for) may mark a folder as too large to answer for.
    const bool short_page = listed.ok() && !listed->next_token.empty() && options.max_keys < 1000;
    EndListing(ticket, *folder, listed.ok() && !short_page ? &*listed : nullptr);
  }
  if (!listed.ok() && dir) {
    if (std::optional<ListResult> answer =
            ListingFrom(AnswerInOutage(*dir, listed.status()), options)) {
      return *answer;
    }
  }
  return listed;
}

std::optional<ListResult> AbsenceCachingUnderStorage::ListingFrom(OutageAnswer answer,
                                                                  const ListOptions& options) {
  if (answer == OutageAnswer::kAbsent) return ListResult{};
  // Only a probe of whether the directory is there: what is in it is not known.
  if (answer == OutageAnswer::kDirectory && options.max_keys == 1) {
    ListResult there;
    there.directory_exists = true;
    return there;
  }
  return std::nullopt;
}

bool AbsenceCachingUnderStorage::IsOutage(const Status& status) {
  return status.code() == StatusCode::kUnavailable ||
         status.code() == StatusCode::kDeadlineExceeded;
}

void AbsenceCachingUnderStorage::SourceAnswered(const Status& status) {
  if (IsOutage(status)) return;  // AnswerInOutage notes it.
  MutexLock l(&mu_);
  source_failed_us_ = 0;
}

AbsenceCachingUnderStorage::OutageAnswer AbsenceCachingUnderStorage::OutageAnswerLocked(
    std::string_view key, int64_t now_us) {
  if (KnownAbsentLocked(key, now_us, options_.outage_ttl.count())) return OutageAnswer::kAbsent;
  if (key.empty()) return OutageAnswer::kNone;
  auto [folder, name] = SplitKey(key);
  auto it = folders_.find(folder);
  if (it != folders_.end() && it->second.complete &&
      it->second.listed_us + options_.outage_ttl.count() > now_us &&
      it->second.dirs.count(name) != 0 && it->second.files.count(name) == 0) {
    return OutageAnswer::kDirectory;
  }
  return OutageAnswer::kNone;
}

AbsenceCachingUnderStorage::OutageAnswer AbsenceCachingUnderStorage::AnswerInOutage(
    std::string_view key, const Status& status) {
  if (options_.outage_ttl.count() <= 0 || !IsOutage(status)) return OutageAnswer::kNone;
  OutageAnswer answer;
  {
    MutexLock l(&mu_);
    const int64_t now = clock_->NowMicros();
    source_failed_us_ = now;
    answer = OutageAnswerLocked(key, now);
    if (answer == OutageAnswer::kNone) return answer;
    ++stats_.outage_answers;
  }
  if (options_.on_outage_answer) options_.on_outage_answer();
  return answer;
}

AbsenceCachingUnderStorage::OutageAnswer AbsenceCachingUnderStorage::AnswerWhileDown(
    std::string_view key) {
  if (options_.outage_ttl.count() <= 0) return OutageAnswer::kNone;
  OutageAnswer answer;
  {
    MutexLock l(&mu_);
    const int64_t now = clock_->NowMicros();
    if (source_failed_us_ == 0 || now >= source_failed_us_ + options_.outage_recheck.count()) {
      return OutageAnswer::kNone;
    }
    answer = OutageAnswerLocked(key, now);
    if (answer == OutageAnswer::kNone) return answer;
    ++stats_.outage_answers;
  }
  if (options_.on_outage_answer) options_.on_outage_answer();
  return answer;
}

StatusOr<std::unique_ptr<ObjectWriter>> AbsenceCachingUnderStorage::StartWrite(
    std::string_view key, const WriterOptions& options) {
  Touch(key);
  StatusOr<std::unique_ptr<ObjectWriter>> writer = UnderStorageWrapper::StartWrite(key, options);
  if (!writer.ok()) return writer;
  return std::unique_ptr<ObjectWriter>(
      std::make_unique<TouchingWriter>(std::move(writer).value(), this, std::string(key)));
}

Status AbsenceCachingUnderStorage::Delete(std::string_view key) {
  Touch(key);
  Status s = UnderStorageWrapper::Delete(key);
  Touch(key);
  return s;
}

StatusOr<ObjectInfo> AbsenceCachingUnderStorage::Rename(std::string_view from, std::string_view to,
                                                        const RenameOptions& options) {
  TouchTree(from);
  TouchTree(to);
  StatusOr<ObjectInfo> moved = UnderStorageWrapper::Rename(from, to, options);
  TouchTree(from);
  TouchTree(to);
  return moved;
}

Status AbsenceCachingUnderStorage::MakeDir(std::string_view key) {
  TouchTree(key);
  Status s = UnderStorageWrapper::MakeDir(key);
  TouchTree(key);
  return s;
}

Status AbsenceCachingUnderStorage::RemoveDir(std::string_view key) {
  TouchTree(key);
  Status s = UnderStorageWrapper::RemoveDir(key);
  TouchTree(key);
  return s;
}

AbsenceCachingUnderStorage::Stats AbsenceCachingUnderStorage::stats() const {
  MutexLock l(&mu_);
  return stats_;
}

void AbsenceCachingUnderStorage::Touch(std::string_view key) {
  MutexLock l(&mu_);
  TouchLocked(key);
}

void AbsenceCachingUnderStorage::TouchLocked(std::string_view key) {
  ++epoch_;
  // Writing "a/b/c" can make "a" and "a/b" appear too (S3 has no directories to create first).
  // The name itself becomes unknown (asked of the source; no outage answer), the folders above
  // it directories.
  std::string_view rest = key;
  bool itself = true;
  while (!rest.empty()) {
    auto [folder, name] = SplitKey(rest);
    auto it = folders_.find(folder);
    if (it != folders_.end()) {
      it->second.names.insert(name);
      if (itself) {
        it->second.files.erase(name);
        it->second.dirs.erase(name);
      } else {
        it->second.dirs.insert(name);
      }
    }
    if (!in_flight_.empty()) touched_[folder] = epoch_;
    rest = rest.substr(0, folder.size());
    itself = false;
  }
}

void AbsenceCachingUnderStorage::TouchTree(std::string_view key) {
  MutexLock l(&mu_);
  TouchLocked(key);
  std::erase_if(folders_, [key](const auto& entry) { return Below(entry.first, key); });
  if (!in_flight_.empty()) tree_touched_ = epoch_;
}

bool AbsenceCachingUnderStorage::KnownAbsent(std::string_view key) {
  {
    MutexLock l(&mu_);
    if (!KnownAbsentLocked(key, clock_->NowMicros(), options_.ttl.count())) return false;
    ++stats_.absent_answers;
  }
  if (options_.on_absent_answer) options_.on_absent_answer();
  return true;
}

bool AbsenceCachingUnderStorage::KnownAbsentLocked(std::string_view key, int64_t now_us,
                                                   int64_t max_age_us) {
  if (key.empty()) return false;  // The root is always there.
  auto [folder, name] = SplitKey(key);
  auto it = folders_.find(folder);
  if (it != folders_.end() && it->second.complete && it->second.listed_us + max_age_us > now_us) {
    return it->second.names.count(name) == 0;
  }
  // Nothing is under a folder that is not there.
  return KnownAbsentLocked(folder, now_us, max_age_us);
}

bool AbsenceCachingUnderStorage::HasFreshListing(const std::string& folder) {
  MutexLock l(&mu_);
  auto it = folders_.find(folder);
  return it != folders_.end() && it->second.listed_us + options_.ttl.count() > clock_->NowMicros();
}

uint64_t AbsenceCachingUnderStorage::BeginListing() {
  MutexLock l(&mu_);
  in_flight_.insert(epoch_);
  return epoch_;
}

void AbsenceCachingUnderStorage::EndListing(uint64_t ticket, const std::string& folder,
                                            const ListResult* listed) {
  MutexLock l(&mu_);
  in_flight_.erase(in_flight_.find(ticket));
  auto touched = touched_.find(folder);
  const bool stale =
      tree_touched_ > ticket || (touched != touched_.end() && touched->second > ticket);
  if (in_flight_.empty()) {
    touched_.clear();
    tree_touched_ = 0;
  } else {
    const uint64_t oldest = *in_flight_.begin();
    std::erase_if(touched_, [oldest](const auto& entry) { return entry.second <= oldest; });
  }
  if (listed == nullptr) return;
  if (stale) {
    ++stats_.listings_dropped;
    return;
  }
  const std::string prefix = folder.empty() ? "" : folder + "/";
  Folder entry;
  entry.complete = listed->next_token.empty();
  entry.listed_us = clock_->NowMicros();
  if (entry.complete) {
    for (const ObjectInfo& o : listed->objects) {
      if (o.key.size() <= prefix.size()) continue;
      entry.names.insert(o.key.substr(prefix.size()));
      entry.files.insert(o.key.substr(prefix.size()));
    }
    for (const std::string& p : listed->common_prefixes) {
      std::string name = p.substr(std::min(p.size(), prefix.size()));
      while (!name.empty() && name.back() == '/') name.pop_back();
      if (name.empty()) continue;
      entry.names.insert(name);
      entry.dirs.insert(std::move(name));
    }
  }
  if (folders_.size() >= options_.max_folders && folders_.count(folder) == 0) {
    auto oldest = folders_.begin();
    for (auto it = folders_.begin(); it != folders_.end(); ++it) {
      if (it->second.listed_us < oldest->second.listed_us) oldest = it;
    }
    folders_.erase(oldest);
  }
  folders_[folder] = std::move(entry);
  ++stats_.listings_kept;
}

void AbsenceCachingUnderStorage::ListFolder(const std::string& folder) {
  {
    MutexLock l(&mu_);
    ++stats_.folders_listed;
  }
  ListOptions whole;
  whole.prefix = folder.empty() ? "" : folder + "/";
  whole.delimiter = "/";
  whole.max_keys = 1000;
  (void)List(whole);  // Kept by List; a failure only means no listing.
}

}  // namespace cairn::ufs
