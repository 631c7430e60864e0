// CacheDir: reads, writes, removal and eviction. Startup (Open) and the recovery scan are in
// cache_dir_recovery.cc.
#include "pagestore/cache_dir.h"

#include <chrono>

#include "common/logging.h"
#include "pagestore/page_format.h"

namespace cairn::pagestore {

uint64_t CacheDir::ChargeForFile(uint64_t file_size) {
  return RoundUp(file_size, kPageAlignment) + kDirEntryCharge;
}

CacheDir::~CacheDir() {
  {
    MutexLock l(&mu_);
    // Together with stopping_: a scanner that saw it also sees stopping_ when it finishes.
    shutting_down_.store(true, std::memory_order_relaxed);
    stopping_ = true;
    ++room_epoch_;
  }
  room_cv_.NotifyAll();
  for (std::thread& t : scanners_) t.join();
}

// ---- Admission -----------------------------------------------------------------------------

uint64_t CacheDir::IncomingGroupBytesLocked(const Incoming& in) const {
  auto pending = group_reserved_.find(in.group);
  return in.charge + (pending == group_reserved_.end() ? 0 : pending->second);
}

bool CacheDir::OverQuotaLocked(const Incoming& in) const {
  return policy_->OverQuota(in.group, IncomingGroupBytesLocked(in));
}

void CacheDir::UnreserveLocked(const Incoming& in) {
  space_.Unreserve(in.charge);
  auto it = group_reserved_.find(in.group);
  if (it != group_reserved_.end() && (it->second -= in.charge) == 0) group_reserved_.erase(it);
}

Status CacheDir::Reserve(const Incoming& in) {
  const uint64_t charge = in.charge;
  if (kSkeletonBytes + charge > config_.capacity_bytes) {
    return ResourceExhaustedError("a page file of " + std::to_string(charge) +
                                  " bytes can never fit in cache folder " + layout_.root());
  }
  while (true) {
    std::vector<Victim> victims;
    {
      MutexLock l(&mu_);
      while (victims.empty()) {
        if (stopping_) return UnavailableError("page store is shutting down");
        if (!OverQuotaLocked(in) && space_.Fits(charge)) {
          space_.Reserve(charge);
          group_reserved_[in.group] += charge;
          return Status::Ok();
        }
        // Pages past their deadline are the cheapest room: no live page is lost.
        if (std::optional<int64_t> next = policy_->NextExpiry()) {
          const int64_t now = config_.clock->NowMicros();
          if (*next <= now) TakeExpiredLocked(now, kExpiredBatch, &victims);
        }
        if (!victims.empty()) break;
        uint64_t deficit = PickVictimsLocked(space_.Deficit(charge), &in, &victims);
        if (!victims.empty()) break;
        const bool quota_blocked = OverQuotaLocked(in);
        if ((deficit > 0 || quota_blocked) && !space_.RoomMayCome(recovering_)) {
          if (quota_blocked) {
            return ResourceExhaustedError(
                "group " + std::to_string(in.group) + " is at its quota (" +
                std::to_string(policy_->group_bytes(in.group)) + " of " +
                std::to_string(policy_->group_quota(in.group)) + " bytes in cache folder " +
                layout_.root() + ") and none of its pages can be evicted (pinned, or too few)");
          }
          return ResourceExhaustedError("cache folder " + layout_.root() + " is full (" +
                                        std::to_string(space_.used()) + " of " +
                                        std::to_string(config_.capacity_bytes) + " bytes, " +
                                        std::to_string(policy_->pinned_bytes()) +
                                        " of them pinned) and nothing can be evicted");
        }
        // The bound is a safety net only: every change that can make room notifies.
        uint64_t epoch = room_epoch_;
        room_cv_.WaitFor(&mu_, std::chrono::milliseconds(200),
                         [&]() REQUIRES(mu_) { return room_epoch_ != epoch; });
      }
    }
    DropVictims(victims);
  }
}

uint64_t CacheDir::PickVictimsLocked(uint64_t bytes, const Incoming* in,
                                     std::vector<Victim>* victims) {
  // The policy must have seen every hit before it names a victim.
  std::vector<Hash128> accesses;
  hits_.TakeAccesses(&accesses);
  ApplyAccessesLocked(accesses);
  const bool only_cold = !space_.exact() && recovering_;
  const policy::VictimFilter is_cold = [this](const Hash128& id) REQUIRES(mu_) {
    auto it = index_.find(id);
    return it != index_.end() && it->second.cold;
  };
  const policy::VictimFilter* filter = only_cold ? &is_cold : nullptr;
  while (true) {
    const bool for_quota = in != nullptr && OverQuotaLocked(*in);
    if (bytes == 0 && !for_quota) break;
    if (only_cold && cold_pages_ == 0) break;  // Wait for the scan rather than scan in vain.
    std::optional<Hash128> victim;
    if (for_quota) {
      // Over its quota: only the group's own pages may go (nullopt if none can).
      victim = policy_->PickVictimForInsert(in->group, IncomingGroupBytesLocked(*in), filter);
    } else {
      victim = filter ? policy_->PickVictim(*filter) : policy_->PickVictim();
    }
    if (!victim) break;
    auto it = index_.find(*victim);
    if (it == index_.end()) {  // Policy and index disagree: a bug; heal rather than loop.
      spdlog::error("page store: eviction policy returned an unknown page");
      policy_->OnRemove(*victim, policy::RemoveReason::kDropped);
      continue;
    }
    std::shared_ptr<const std::string> object_id = it->second.object_id;
    uint64_t freed = EraseLocked(it, policy::RemoveReason::kEvicted);
    ++(for_quota ? quota_evictions_ : capacity_evictions_);
    victims->push_back({*victim, freed, std::move(object_id),
                        for_quota ? EvictionReason::kQuota : EvictionReason::kCapacity});
    bytes = freed >= bytes ? 0 : bytes - freed;
  }
  return bytes;
}

std::shared_ptr<const std::string> CacheDir::PublishLocked(const Hash128& id, const Incoming& in,
                                                           std::string_view object_id,
                                                           const policy::EntryHints& hints) {
  UnreserveLocked(in);
  auto [it, inserted] = index_.try_emplace(id);
  Entry& entry = it->second;
  // A new copy of a cached page has the same key, hence the same object id: keep the string.
  std::shared_ptr<const std::string> object = std::move(entry.object_id);
  if (!object || *object != object_id) object = object_ids_.Intern(object_id);
  if (!inserted) {
    // The rename replaced the old copy's file, so its bytes are free now.
    uint64_t old = entry.charge;
    if (entry.cold) --cold_pages_;
    ForgetOpenFileLocked(id, entry);
    ReleaseLocked(old);
  }
  entry = Entry{in.charge, next_generation_++, /*is_cold=*/false, object};
  entry.cached_at_us = config_.clock->NowMicros();
  policy_->OnInsert(id, in.charge, hints);
  ++room_epoch_;
  room_cv_.NotifyAll();  // A new evictable page for writers waiting for room.
  return object;
}

void CacheDir::ReleaseLocked(uint64_t bytes) {
  space_.Release(bytes);
  ++room_epoch_;
  room_cv_.NotifyAll();
}

uint64_t CacheDir::EraseLocked(Index::iterator it, policy::RemoveReason reason) {
  const Hash128 id = it->first;
  const uint64_t charge = it->second.charge;
  if (it->second.cold) --cold_pages_;
  ForgetOpenFileLocked(id, it->second);
  policy_->OnRemove(id, reason);
  index_.erase(it);
  space_.StartDrop(charge);
  ++dropping_[id];
  ScanState state = scan_state_[DirLayout::SubdirOf(id)];
  if (state == ScanState::kPending || state == ScanState::kListing) tombstones_.insert(id);
  return charge;
}

void CacheDir::DropFile(const Hash128& id, uint64_t charge) {
  MutexLock path_lock(&PathLock(id));
  DropFileWithPathLock(id, charge);
}

void CacheDir::DropFileWithPathLock(const Hash128& id, uint64_t charge) {
  bool republished;
  {
    MutexLock l(&mu_);
    republished = index_.count(id) > 0;
  }
  // A copy published by Put since the drop replaced our file by rename (so our bytes are free
  // already): the new file must stay. (Probes and the scan never adopt a dropping page.)
  Status s = republished ? Status::Ok() : disk().Unlink(layout_.PagePath(id));
  MutexLock l(&mu_);
  if (auto it = dropping_.find(id); it != dropping_.end() && --it->second == 0) dropping_.erase(it);
  // A file still there but no longer indexed keeps its bytes counted (stuck), so the budget
  // stays true; a restart's scan finds and indexes it again.
  const bool unlinked = s.ok() || s.code() == StatusCode::kNotFound;
  space_.FinishDrop(charge, unlinked);
  if (unlinked) {
    ++room_epoch_;
    room_cv_.NotifyAll();
  } else {
    spdlog::error("page store: cannot remove a page file: {}", s.ToString());
  }
}

void CacheDir::DropVictims(const std::vector<Victim>& victims) {
  for (const Victim& v : victims) {
    DropFile(v.id, v.charge);
    if (config_.on_evict) config_.on_evict(v.object_id ? *v.object_id : "", v.charge, v.reason);
  }
}

// ---- Operations ------------------------------------------------------------------------------

Status CacheDir::Put(const KeyInfo& key, std::span<const char> data, std::span<const uint64_t> sums,
                     std::optional<policy::Priority> priority) {
  CAIRN_ASSIGN_OR_RETURN(
      std::string header,
      EncodePageHeader(key.serialized, key.page_index, static_cast<uint32_t>(data.size()), sums));
  const uint64_t epoch = RulesEpoch();
  policy::EntryHints hints = Resolve(key.object_id());
  if (priority) hints.priority = *priority;
  if (hints.expires_at_us != 0 && hints.expires_at_us <= config_.clock->NowMicros()) {
    return Status::Ok();  // It would never be served.
  }
  const Incoming in{hints.group, ChargeForFile(header.size() + data.size())};
  CAIRN_RETURN_IF_ERROR(Reserve(in));

  // Write under a temp name, outside every lock; publish by rename, so the page's name only
  // ever refers to a complete file. No fsync: after a power loss the file may be incomplete
  // or empty, and Open's checks (header checksum, exact size) and the client's data checksums
  // catch it; a cache can refetch what it loses.
  const std::string temp = layout_.TempPath(key.id, nonce_, temp_sequence_.fetch_add(1));
  const std::span<const char> pieces[] = {header, data};
  Status s = disk().WriteNewFile(temp, pieces);
  std::shared_ptr<const std::string> published;
  if (s.ok()) {
    MutexLock path_lock(&PathLock(key.id));
    {
      MutexLock l(&mu_);
      ++publishing_[key.id];
    }
    s = disk().Rename(temp, layout_.PagePath(key.id));
    {
      MutexLock l(&mu_);
      if (auto it = publishing_.find(key.id); --it->second == 0) publishing_.erase(it);
      if (s.ok()) published = PublishLocked(key.id, in, key.object_id(), hints);
    }
    if (!s.ok()) disk().Unlink(temp).IgnoreError();  // Best effort; a restart removes leftovers.
  }
  if (published) {
    // The rules changed while we wrote, and a Reattribute may have walked past this page
    // before it was indexed: file it under the rules in force now.
    if (RulesEpoch() != epoch) ApplyResolver({{key.id, std::move(published)}});
    return Status::Ok();
  }
  MutexLock l(&mu_);
  UnreserveLocked(in);
  ReleaseLocked(in.charge);
  return s.WithContext("caching page in " + layout_.root());
}

void CacheDir::TouchLocked(Index::iterator it) {
  policy_->OnAccess(it->first);
  if (it->second.cold) {
    it->second.cold = false;
    --cold_pages_;
  }
}

bool CacheDir::SubdirScannedLocked(const Hash128& id) const {
  return scan_state_[DirLayout::SubdirOf(id)] == ScanState::kDone;
}

namespace {

// A PageReader sharing an open page file kept by the folder's open-file cache; its copy id is
// the generation of the index entry the file belongs to.
class SharedPageReader final : public PageReader {
 public:
  SharedPageReader(std::shared_ptr<const FilePageReader> file, uint64_t generation)
      : file_(std::move(file)), generation_(generation) {}
  uint32_t data_length() const override { return file_->data_length(); }
  const std::vector<uint64_t>& chunk_checksums() const override { return file_->chunk_checksums(); }
  Status ReadAt(uint32_t offset, std::span<char> out) const override {
    return file_->ReadAt(offset, out);
  }
  Status ReadDirectAt(uint32_t offset, std::span<char> out) const override {
    return file_->ReadDirectAt(offset, out);
  }
  int native_fd() const override { return file_->native_fd(); }
  uint64_t data_file_offset() const override { return file_->data_file_offset(); }
  uint64_t copy_id() const override { return generation_; }

 private:
  std::shared_ptr<const FilePageReader> file_;
  const uint64_t generation_;
};

}  // namespace

std::shared_ptr<CacheDir::KeptOpen> CacheDir::ForgetOpenFileLocked(const Hash128& id,
                                                                   Entry& entry) {
  if (!entry.open_file) return nullptr;
  hits_.Erase(id);  // Not the last holder of the file: `entry` still is.
  open_lru_.erase(entry.open_lru);
  return std::move(entry.open_file);
}

void CacheDir::ListHitLocked(const Hash128& id, const Entry& entry) {
  std::optional<policy::EntryHints> hints = policy_->HintsOf(id);
  hits_.Insert(id, {entry.open_file, entry.generation}, hints ? hints->expires_at_us : 0);
}

void CacheDir::ApplyAccessesLocked(const std::vector<Hash128>& ids) {
  for (const Hash128& id : ids) {
    auto it = index_.find(id);
    if (it == index_.end()) continue;  // Dropped since its hit.
    TouchLocked(it);
    if (it->second.open_file) open_lru_.splice(open_lru_.begin(), open_lru_, it->second.open_lru);
  }
}

void CacheDir::ApplyAccesses(const std::vector<Hash128>& ids) {
  if (ids.empty()) return;
  MutexLock l(&mu_);
  ApplyAccessesLocked(ids);
}

bool CacheDir::StillValid(KeptOpen& kept, const std::string& path) const {
  const int64_t now = config_.clock->NowMicros();
  const bool check_name =
      now - kept.checked_us.load(std::memory_order_relaxed) >= kOpenFileRecheckMicros;
  if (!(check_name ? kept.file->StillAt(path) : kept.file->StillWhole())) return false;
  if (check_name) kept.checked_us.store(now, std::memory_order_relaxed);
  return true;
}

std::unique_ptr<PageReader> CacheDir::FastHit(const KeyInfo& key, const std::string& path) {
  std::vector<Hash128> full_log;
  std::optional<HitIndex::Hit> hit = hits_.Find(key.id, config_.clock->NowMicros(), &full_log);
  ApplyAccesses(full_log);
  if (!hit || !StillValid(*hit->file, path)) return nullptr;  // The index path decides.
  return std::unique_ptr<PageReader>(new SharedPageReader(hit->file->file, hit->generation));
}

std::shared_ptr<CacheDir::KeptOpen> CacheDir::RememberOpenFileLocked(
    const Hash128& id, uint64_t generation, std::shared_ptr<const FilePageReader> file) {
  auto it = index_.find(id);
  if (it == index_.end() || it->second.generation != generation || it->second.open_file) {
    return nullptr;
  }
  std::shared_ptr<KeptOpen> dropped;
  if (open_lru_.size() >= kMaxOpenFiles) {
    auto oldest = index_.find(open_lru_.back());
    if (oldest != index_.end()) dropped = ForgetOpenFileLocked(oldest->first, oldest->second);
  }
  open_lru_.push_front(id);
  // Just opened by name with every check: checked now.
  it->second.open_file = std::make_shared<KeptOpen>(std::move(file), config_.clock->NowMicros());
  it->second.open_lru = open_lru_.begin();
  ListHitLocked(id, it->second);
  return dropped;
}

StatusOr<std::unique_ptr<PageReader>> CacheDir::OpenPage(const KeyInfo& key) {
  const std::string path = layout_.PagePath(key.id);
  if (std::unique_ptr<PageReader> hit = FastHit(key, path)) return hit;
  for (int attempt = 0;; ++attempt) {
    uint64_t generation = 0;
    bool unattributed = false;
    std::optional<Victim> expired;
    std::shared_ptr<KeptOpen> kept;
    {
      MutexLock l(&mu_);
      auto it = index_.find(key.id);
      if (it != index_.end() && (expired = EraseIfExpiredLocked(it))) {
        // Its TTL passed: never served; the file goes below, outside mu_.
      } else if (it != index_.end()) {
        generation = it->second.generation;
        unattributed = !it->second.object_id;
        TouchLocked(it);
        if (it->second.open_file) {
          kept = it->second.open_file;
          open_lru_.splice(open_lru_.begin(), open_lru_, it->second.open_lru);
          ListHitLocked(key.id, it->second);  // Unlisted by a hints change: list it again.
        }
      } else if (SubdirScannedLocked(key.id)) {
        return NotFoundError("page not cached");
      }
    }
    if (expired) {
      DropVictims({*expired});
      return NotFoundError("page not cached (its TTL passed)");
    }
    // The checks of the open file run outside mu_, so hits on other pages never wait for
    // them: its size on every hit (one fstat), its name at most once per kOpenFileRecheckMicros
    // (two more system calls).
    if (kept != nullptr) {
      if (StillValid(*kept, path)) {
        return std::unique_ptr<PageReader>(new SharedPageReader(kept->file, generation));
      }
      // Truncated, replaced or swapped since it was opened: reopen the name, which runs every
      // check and drops the page if the file there is not this page.
      MutexLock l(&mu_);
      auto it = index_.find(key.id);
      if (it != index_.end() && it->second.generation == generation &&
          it->second.open_file == kept) {
        ForgetOpenFileLocked(key.id, it->second);  // `kept` still holds it: no close here.
      }
    }
    if (generation == 0) {
      uint64_t probed_generation = 0;
      auto probed = Probe(key, /*accessed=*/true, &probed_generation);
      if (!probed) continue;  // Indexed meanwhile.
      if (!probed->ok()) return probed->status();
      return std::unique_ptr<PageReader>(new SharedPageReader(
          std::shared_ptr<const FilePageReader>(std::move(*probed).value()), probed_generation));
    }
    auto reader = OpenPageFile(disk(), path, key.serialized, key.page_index);
    if (reader.ok()) {
      std::shared_ptr<const FilePageReader> file(std::move(reader).value());
      // The scan could not read this page's header: now that it checked out, file it under its
      // rules.
      const policy::EntryHints hints =
          unattributed ? Resolve(key.object_id()) : policy::EntryHints{};
      std::shared_ptr<KeptOpen> dropped;  // Closed after mu_ is released.
      {
        MutexLock l(&mu_);
        auto it = index_.find(key.id);
        if (unattributed && it != index_.end() && it->second.generation == generation &&
            !it->second.object_id) {
          it->second.object_id = object_ids_.Intern(key.object_id());
          policy_->Update(key.id, hints);
          if (it->second.open_file) ListHitLocked(key.id, it->second);  // Its new deadline.
        }
        dropped = RememberOpenFileLocked(key.id, generation, file);
      }
      return std::unique_ptr<PageReader>(new SharedPageReader(std::move(file), generation));
    }
    const StatusCode code = reader.status().code();
    // An I/O error says nothing about the page: keep it and report.
    if (code != StatusCode::kNotFound && code != StatusCode::kCorruption) return reader.status();
    if (DropIfCurrent(key.id, generation, code == StatusCode::kCorruption) || attempt >= 2) {
      if (code == StatusCode::kCorruption) {
        spdlog::warn("page store: dropped corrupt page file {}: {}", path,
                     reader.status().message());
      }
      return reader.status();
    }
  }
}

bool CacheDir::DropIfCurrent(const Hash128& id, uint64_t generation, bool corrupt) {
  MutexLock path_lock(&PathLock(id));
  uint64_t charge;
  {
    MutexLock l(&mu_);
    auto it = index_.find(id);
    if (it == index_.end()) return true;  // Someone else dropped it already.
    if (it->second.generation != generation) return false;
    charge = EraseLocked(it, policy::RemoveReason::kDropped);
    if (corrupt) ++corrupt_pages_;
  }
  DropFileWithPathLock(id, charge);
  return true;
}

std::optional<StatusOr<std::unique_ptr<FilePageReader>>> CacheDir::Probe(const KeyInfo& key,
                                                                         bool accessed,
                                                                         uint64_t* generation) {
  // The path lock keeps Put, Remove and eviction from changing the file while we adopt it.
  MutexLock path_lock(&PathLock(key.id));
  {
    MutexLock l(&mu_);
    if (index_.count(key.id)) return std::nullopt;
    if (SubdirScannedLocked(key.id) || dropping_.count(key.id)) {
      return NotFoundError("page not cached");
    }
  }
  const std::string path = layout_.PagePath(key.id);
  auto reader = OpenPageFile(disk(), path, key.serialized, key.page_index);
  if (!reader.ok()) {
    if (reader.status().code() == StatusCode::kCorruption) {
      {
        MutexLock l(&mu_);
        ++corrupt_pages_;
        ScanState state = scan_state_[DirLayout::SubdirOf(key.id)];
        if (state == ScanState::kPending || state == ScanState::kListing) {
          tombstones_.insert(key.id);
        }
      }
      spdlog::warn("page store: dropped corrupt page file {}: {}", path, reader.status().message());
      // Not counted yet (the scan has not reached it), so there are no bytes to release.
      disk().Unlink(path).IgnoreError();
    }
    return reader.status();
  }
  const uint64_t epoch = RulesEpoch();
  policy::EntryHints hints = Resolve(key.object_id());
  if (hints.expires_at_us != 0 && hints.expires_at_us <= config_.clock->NowMicros()) {
    // Left on disk: the scan indexes it and the sweep removes it.
    return NotFoundError("page not cached (its TTL passed)");
  }
  std::shared_ptr<const std::string> adopted;
  {
    MutexLock l(&mu_);
    auto it = index_.find(key.id);
    if (it == index_.end()) {  // The scan may have added it since the check above.
      uint64_t charge = ChargeForFile((*reader)->header().file_size());
      adopted = object_ids_.Intern(key.object_id());
      auto [adopted_it, inserted] =
          index_.emplace(key.id, Entry{charge, next_generation_++, /*is_cold=*/!accessed, adopted});
      if (inserted) adopted_it->second.cached_at_us = config_.clock->NowMicros();
      if (generation != nullptr) *generation = adopted_it->second.generation;
      space_.Adopt(charge);
      ++recovered_pages_;
      if (!accessed) ++cold_pages_;
      hints.cold = !accessed;
      policy_->OnInsert(key.id, charge, hints);
    } else {
      // Indexed by the scan meanwhile; the path lock held since the open says it is this file.
      if (generation != nullptr) *generation = it->second.generation;
      if (accessed) TouchLocked(it);
    }
  }
  if (adopted && RulesEpoch() != epoch) ApplyResolver({{key.id, std::move(adopted)}});
  return reader;
}

void CacheDir::CountRemovalLocked(RemoveReason reason) {
  switch (reason) {
    case RemoveReason::kCorrupt:
      ++corrupt_pages_;
      break;
    case RemoveReason::kInvalidated:
      ++invalidated_pages_;
      break;
    case RemoveReason::kFreed:
      ++freed_pages_;
      break;
  }
}

Status CacheDir::RemoveCopy(const KeyInfo& key, uint64_t generation, RemoveReason reason) {
  MutexLock path_lock(&PathLock(key.id));
  uint64_t charge;
  {
    MutexLock l(&mu_);
    auto it = index_.find(key.id);
    if (it == index_.end() || it->second.generation != generation) {
      return NotFoundError("that copy of the page is no longer cached");
    }
    charge = EraseLocked(it, policy::RemoveReason::kDropped);
    CountRemovalLocked(reason);
  }
  DropFileWithPathLock(key.id, charge);
  return Status::Ok();
}

Status CacheDir::Remove(const KeyInfo& key, RemoveReason reason) {
  MutexLock path_lock(&PathLock(key.id));
  std::optional<uint64_t> charge;
  {
    MutexLock l(&mu_);
    auto it = index_.find(key.id);
    if (it != index_.end()) {
      // Not an eviction: an adaptive policy must not learn from it.
      charge = EraseLocked(it, policy::RemoveReason::kDropped);
      CountRemovalLocked(reason);
    } else if (SubdirScannedLocked(key.id)) {
      return NotFoundError("page not cached");
    } else {
      ScanState state = scan_state_[DirLayout::SubdirOf(key.id)];
      if (state == ScanState::kPending || state == ScanState::kListing) {
        tombstones_.insert(key.id);
      }
    }
  }
  if (charge) {
    DropFileWithPathLock(key.id, *charge);
    return Status::Ok();
  }
  // Not indexed, but the recovery scan has not seen its sub-folder: the file may be on disk.
  Status s = disk().Unlink(layout_.PagePath(key.id));
  if (!s.ok()) return s.code() == StatusCode::kNotFound ? NotFoundError("page not cached") : s;
  MutexLock l(&mu_);
  CountRemovalLocked(reason);
  return Status::Ok();
}

bool CacheDir::Contains(const KeyInfo& key) {
  std::optional<Victim> expired;
  {
    MutexLock l(&mu_);
    auto it = index_.find(key.id);
    if (it != index_.end()) {
      expired = EraseIfExpiredLocked(it);
      if (!expired) return true;
    } else if (SubdirScannedLocked(key.id)) {
      return false;
    }
  }
  if (expired) {
    DropVictims({*expired});
    return false;
  }
  auto probed = Probe(key, /*accessed=*/false);
  return !probed || probed->ok();
}

PageStoreStats CacheDir::Stats() const {
  MutexLock l(&mu_);
  PageStoreStats s;
  s.pages = index_.size();
  s.used_bytes = space_.used();
  s.capacity_bytes = config_.capacity_bytes;
  s.pinned_bytes = policy_->pinned_bytes();
  s.evictions = capacity_evictions_ + quota_evictions_;
  s.capacity_evictions = capacity_evictions_;
  s.quota_evictions = quota_evictions_;
  s.expired_pages = expired_pages_;
  s.freed_pages = freed_pages_;
  s.invalidated_pages = invalidated_pages_;
  s.corrupt_pages = corrupt_pages_;
  s.recovered_pages = recovered_pages_;
  s.recovering = recovering_;
  return s;
}

}  // namespace cairn::pagestore
