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
    stopping_ = true;
    ++room_epoch_;
  }
  room_cv_.NotifyAll();
  for (std::thread& t : scanners_) t.join();
}

// ---- Admission -----------------------------------------------------------------------------

bool CacheDir::FitsLocked(uint64_t charge) const {
  if (used_ + charge > config_.capacity_bytes) return false;
  return exact_ || charge <= credit_;
}

// Bytes still to be evicted before `charge` fits, after what drops in progress will free.
uint64_t CacheDir::DeficitLocked(uint64_t charge) const {
  uint64_t need = 0;
  if (used_ + charge > config_.capacity_bytes) need = used_ + charge - config_.capacity_bytes;
  if (!exact_ && charge > credit_) need = std::max(need, charge - credit_);
  return need > freeing_ ? need - freeing_ : 0;
}

// True if waiting can bring room without this thread evicting: writes in flight become evictable
// pages, drops in flight release bytes, and the recovery scan finds evictable pages.
bool CacheDir::RoomMayComeLocked() const {
  return reserved_ > 0 || freeing_ > 0 || (!exact_ && recovering_);
}

Status CacheDir::Reserve(uint64_t charge) {
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
        if (FitsLocked(charge)) {
          used_ += charge;
          reserved_ += charge;
          if (!exact_) credit_ -= charge;
          return Status::Ok();
        }
        uint64_t deficit = PickVictimsLocked(DeficitLocked(charge), &victims);
        if (!victims.empty()) break;
        if (deficit > 0 && !RoomMayComeLocked()) {
          return ResourceExhaustedError(
              "cache folder " + layout_.root() + " is full (" + std::to_string(used_) + " of " +
              std::to_string(config_.capacity_bytes) + " bytes) and nothing can be evicted");
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

uint64_t CacheDir::PickVictimsLocked(uint64_t bytes, std::vector<Victim>* victims) {
  const bool only_cold = !exact_ && recovering_;
  const policy::VictimFilter is_cold = [this](const Hash128& id) REQUIRES(mu_) {
    auto it = index_.find(id);
    return it != index_.end() && it->second.cold;
  };
  while (bytes > 0) {
    if (only_cold && cold_pages_ == 0) break;  // Wait for the scan rather than scan in vain.
    std::optional<Hash128> victim =
        only_cold ? policy_->PickVictim(is_cold) : policy_->PickVictim();
    if (!victim) break;
    auto it = index_.find(*victim);
    if (it == index_.end()) {  // Policy and index disagree: a bug; heal rather than loop.
      spdlog::error("page store: eviction policy returned an unknown page");
      policy_->OnRemove(*victim);
      continue;
    }
    uint64_t freed = EraseLocked(it);
    ++evictions_;
    victims->push_back({*victim, freed});
    bytes = freed >= bytes ? 0 : bytes - freed;
  }
  return bytes;
}

void CacheDir::PublishLocked(const Hash128& id, uint64_t charge) {
  reserved_ -= charge;
  Entry fresh{charge, next_generation_++, /*cold=*/false};
  auto [it, inserted] = index_.try_emplace(id, fresh);
  if (!inserted) {
    // The rename replaced the old copy's file, so its bytes are free now.
    uint64_t old = it->second.charge;
    if (it->second.cold) --cold_pages_;
    ForgetOpenFileLocked(it->second);
    it->second = fresh;
    ReleaseLocked(old);
  }
  policy_->OnInsert(id, charge);
  ++room_epoch_;
  room_cv_.NotifyAll();  // A new evictable page for writers waiting for room.
}

void CacheDir::ReleaseLocked(uint64_t bytes) {
  used_ -= bytes;
  if (!exact_) credit_ += bytes;
  ++room_epoch_;
  room_cv_.NotifyAll();
}

uint64_t CacheDir::EraseLocked(Index::iterator it) {
  const Hash128 id = it->first;
  const uint64_t charge = it->second.charge;
  if (it->second.cold) --cold_pages_;
  ForgetOpenFileLocked(it->second);
  policy_->OnRemove(id);
  index_.erase(it);
  freeing_ += charge;
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
  freeing_ -= charge;
  if (auto it = dropping_.find(id); it != dropping_.end() && --it->second == 0) dropping_.erase(it);
  if (s.ok() || s.code() == StatusCode::kNotFound) {
    ReleaseLocked(charge);
  } else {
    // The file is still there but no longer indexed: keep its bytes counted so the budget
    // stays true. A restart's scan finds and indexes it again.
    stuck_ += charge;
    spdlog::error("page store: cannot remove a page file: {}", s.ToString());
  }
}

void CacheDir::DropVictims(const std::vector<Victim>& victims) {
  for (const Victim& v : victims) DropFile(v.id, v.charge);
}

// ---- Operations ------------------------------------------------------------------------------

Status CacheDir::Put(const KeyInfo& key, std::span<const char> data,
                     std::span<const uint64_t> sums) {
  CAIRN_ASSIGN_OR_RETURN(
      std::string header,
      EncodePageHeader(key.serialized, key.page_index, static_cast<uint32_t>(data.size()), sums));
  const uint64_t charge = ChargeForFile(header.size() + data.size());
  CAIRN_RETURN_IF_ERROR(Reserve(charge));

  // Write under a temp name, outside every lock; publish by rename, so the page's name only
  // ever refers to a complete file. No fsync: after a power loss the file may be incomplete
  // or empty, and Open's checks (header checksum, exact size) and the client's data checksums
  // catch it; a cache can refetch what it loses.
  const std::string temp = layout_.TempPath(key.id, nonce_, temp_sequence_.fetch_add(1));
  const std::span<const char> pieces[] = {header, data};
  Status s = disk().WriteNewFile(temp, pieces);
  if (s.ok()) {
    MutexLock path_lock(&PathLock(key.id));
    s = disk().Rename(temp, layout_.PagePath(key.id));
    if (s.ok()) {
      MutexLock l(&mu_);
      PublishLocked(key.id, charge);
      return Status::Ok();
    }
    disk().Unlink(temp).IgnoreError();  // Best effort; the next startup removes leftovers.
  }
  MutexLock l(&mu_);
  reserved_ -= charge;
  ReleaseLocked(charge);
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

// A PageReader sharing an open page file kept by the folder's open-file cache.
class SharedPageReader final : public PageReader {
 public:
  explicit SharedPageReader(std::shared_ptr<const FilePageReader> file) : file_(std::move(file)) {}
  uint32_t data_length() const override { return file_->data_length(); }
  const std::vector<uint64_t>& chunk_checksums() const override {
    return file_->chunk_checksums();
  }
  Status ReadAt(uint32_t offset, std::span<char> out) const override {
    return file_->ReadAt(offset, out);
  }
  int native_fd() const override { return file_->native_fd(); }
  uint64_t data_file_offset() const override { return file_->data_file_offset(); }

 private:
  std::shared_ptr<const FilePageReader> file_;
};

}  // namespace

void CacheDir::ForgetOpenFileLocked(Entry& entry) {
  if (!entry.open_file) return;
  entry.open_file.reset();
  open_lru_.erase(entry.open_lru);
}

void CacheDir::RememberOpenFileLocked(const Hash128& id, uint64_t generation,
                                      std::shared_ptr<const FilePageReader> file) {
  auto it = index_.find(id);
  if (it == index_.end() || it->second.generation != generation || it->second.open_file) return;
  if (open_lru_.size() >= kMaxOpenFiles) {
    auto oldest = index_.find(open_lru_.back());
    if (oldest != index_.end()) ForgetOpenFileLocked(oldest->second);
  }
  open_lru_.push_front(id);
  it->second.open_file = std::move(file);
  it->second.open_lru = open_lru_.begin();
}

StatusOr<std::unique_ptr<PageReader>> CacheDir::OpenPage(const KeyInfo& key) {
  const std::string path = layout_.PagePath(key.id);
  for (int attempt = 0;; ++attempt) {
    uint64_t generation = 0;
    {
      MutexLock l(&mu_);
      auto it = index_.find(key.id);
      if (it != index_.end()) {
        generation = it->second.generation;
        TouchLocked(it);
        if (it->second.open_file) {
          if (it->second.open_file->StillAt(path)) {
            open_lru_.splice(open_lru_.begin(), open_lru_, it->second.open_lru);
            return std::unique_ptr<PageReader>(new SharedPageReader(it->second.open_file));
          }
          // Truncated, replaced or swapped since it was opened: reopen the name, which runs
          // every check and drops the page if the file there is not this page.
          ForgetOpenFileLocked(it->second);
        }
      } else if (SubdirScannedLocked(key.id)) {
        return NotFoundError("page not cached");
      }
    }
    if (generation == 0) {
      auto probed = Probe(key, /*accessed=*/true);
      if (!probed) continue;  // Indexed meanwhile.
      if (!probed->ok()) return probed->status();
      return std::unique_ptr<PageReader>(std::move(*probed).value());
    }
    auto reader = OpenPageFile(disk(), path, key.serialized, key.page_index);
    if (reader.ok()) {
      std::shared_ptr<const FilePageReader> file(std::move(reader).value());
      {
        MutexLock l(&mu_);
        RememberOpenFileLocked(key.id, generation, file);
      }
      return std::unique_ptr<PageReader>(new SharedPageReader(std::move(file)));
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
    charge = EraseLocked(it);
    if (corrupt) ++corrupt_pages_;
  }
  DropFileWithPathLock(id, charge);
  return true;
}

std::optional<StatusOr<std::unique_ptr<FilePageReader>>> CacheDir::Probe(const KeyInfo& key,
                                                                         bool accessed) {
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
  MutexLock l(&mu_);
  auto it = index_.find(key.id);
  if (it == index_.end()) {  // The scan may have added it since the check above.
    uint64_t charge = ChargeForFile((*reader)->header().file_size());
    index_.emplace(key.id, Entry{charge, next_generation_++, /*cold=*/!accessed});
    used_ += charge;
    ++recovered_pages_;
    if (!accessed) ++cold_pages_;
    policy_->OnInsert(key.id, charge, {.cold = !accessed});
  } else if (accessed) {
    TouchLocked(it);
  }
  return reader;
}

Status CacheDir::Remove(const KeyInfo& key, RemoveReason reason) {
  const bool corrupt = reason == RemoveReason::kCorrupt;
  MutexLock path_lock(&PathLock(key.id));
  std::optional<uint64_t> charge;
  {
    MutexLock l(&mu_);
    auto it = index_.find(key.id);
    if (it != index_.end()) {
      charge = EraseLocked(it);
      if (corrupt) ++corrupt_pages_;
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
  if (corrupt) {
    MutexLock l(&mu_);
    ++corrupt_pages_;
  }
  return Status::Ok();
}

bool CacheDir::Contains(const KeyInfo& key) {
  {
    MutexLock l(&mu_);
    if (index_.count(key.id)) return true;
    if (SubdirScannedLocked(key.id)) return false;
  }
  auto probed = Probe(key, /*accessed=*/false);
  return !probed || probed->ok();
}

PageStoreStats CacheDir::Stats() const {
  MutexLock l(&mu_);
  PageStoreStats s;
  s.pages = index_.size();
  s.used_bytes = used_;
  s.capacity_bytes = config_.capacity_bytes;
  s.evictions = evictions_;
  s.corrupt_pages = corrupt_pages_;
  s.recovered_pages = recovered_pages_;
  s.recovering = recovering_;
  return s;
}

}  // namespace cairn::pagestore
