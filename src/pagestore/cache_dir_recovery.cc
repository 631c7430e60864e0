// CacheDir startup: folder checks and preparation, and the background scan that rebuilds the
// index of a folder that already holds pages.
//
// The scan lists each sub-folder (readdir + one fstatat per file for its size), reads the key
// from each page's header (one open + one 4 KiB read: the cache rules need the object id, and a
// pin must hold across a restart), resolves its hints and indexes it. The data and the file
// size are not checked: a damaged file is caught when it is first opened. Until a sub-folder is
// scanned, Open/Contains of a page in it look for the file by name (names are deterministic) and
// adopt it after the usual checks, so hits are served from the first moment.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "common/logging.h"
#include "pagestore/cache_dir.h"
#include "pagestore/page_format.h"

namespace cairn::pagestore {
namespace {

// Pages indexed per hold of the folder mutex, so lookups never wait long behind the scan.
constexpr size_t kScanBatch = 512;

Status PrepareRoot(Disk& disk, const std::string& root) {
  auto info = disk.Stat(root);
  if (!info.ok() && info.status().code() == StatusCode::kNotFound) {
    Status s = disk.CreateDir(root);
    if (s.code() == StatusCode::kNotFound) {
      return NotFoundError("cannot create cache folder " + root + ": its parent does not exist");
    }
    CAIRN_RETURN_IF_ERROR(s);
    info = disk.Stat(root);
  }
  if (!info.ok()) return info.status();
  if (!info->is_dir) return FailedPreconditionError("cache folder " + root + " is not a directory");
  if (info->mode & 0002) {
    char mode[16];
    std::snprintf(mode, sizeof(mode), "%04o", info->mode & 07777u);
    return PermissionDeniedError(
        "cache folder " + root + " is world-writable (mode " + mode +
        "): other users could plant or swap page files. Use a folder only this user can write "
        "(e.g. chmod 0700)");
  }
  return disk.CheckWritable(root);
}

uint64_t MakeNonce(Clock* clock) {
  std::string seed = std::to_string(clock->WallNanos()) + "/" + std::to_string(::getpid()) + "/" +
                     std::to_string(Clock::Real()->NowMicros());
  return Hash64(seed);
}

}  // namespace

StatusOr<std::unique_ptr<CacheDir>> CacheDir::Open(Config config) {
  if (config.disk == nullptr) config.disk = PosixDisk();
  if (config.clock == nullptr) config.clock = Clock::Real();
  if (config.path.empty()) return InvalidArgumentError("cache folder path is empty");
  const uint64_t largest_page =
      ChargeForFile(RoundUp(HeaderLength(0, config.page_size), kPageAlignment) + config.page_size);
  if (config.capacity_bytes < kSkeletonBytes + largest_page) {
    return InvalidArgumentError(
        "capacity of cache folder " + config.path + " (" + std::to_string(config.capacity_bytes) +
        " bytes) cannot hold the folder structure and one page; the minimum is " +
        std::to_string(kSkeletonBytes + largest_page));
  }
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<policy::PolicyEngine> policy,
                         policy::PolicyEngine::Create(config.eviction_policy));
  Disk& disk = *config.disk;
  DirLayout layout(config.path);
  CAIRN_RETURN_IF_ERROR(PrepareRoot(disk, layout.root()));
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<DiskLock> lock, disk.LockFile(layout.LockPath()));
  CAIRN_RETURN_IF_ERROR(disk.CreateDir(layout.VersionDir()));
  for (int i = 0; i < kSubdirCount; ++i)
    CAIRN_RETURN_IF_ERROR(disk.CreateDir(layout.SubdirPath(i)));

  // Everything the file system holds is an upper bound of what this folder holds, so the rest of
  // the capacity is free for sure, before the scan knows anything.
  uint64_t credit = 0;
  auto fs_used = disk.FileSystemUsedBytes(layout.root());
  if (fs_used.ok()) {
    credit = config.capacity_bytes > *fs_used ? config.capacity_bytes - *fs_used : 0;
  } else {
    spdlog::warn("page store: {}; writes wait for the recovery scan", fs_used.status().ToString());
  }
  uint64_t nonce = MakeNonce(config.clock);
  std::unique_ptr<CacheDir> dir(
      new CacheDir(std::move(config), std::move(policy), std::move(lock), credit, nonce));
  return dir;
}

CacheDir::CacheDir(Config config, std::unique_ptr<policy::PolicyEngine> policy,
                   std::unique_ptr<DiskLock> lock, uint64_t initial_credit, uint64_t nonce)
    : config_(std::move(config)),
      layout_(config_.path),
      nonce_(nonce),
      lock_(std::move(lock)),
      policy_(std::move(policy)),
      space_(config_.capacity_bytes, kSkeletonBytes, initial_credit) {
  scan_state_.fill(ScanState::kPending);
  scan_start_micros_ = config_.clock->NowMicros();
  int threads = std::clamp(config_.recovery_threads, 1, kSubdirCount);
  {
    MutexLock l(&mu_);
    scanners_running_ = threads;
  }
  scanners_.reserve(threads);
  for (int i = 0; i < threads; ++i) scanners_.emplace_back([this] { RecoveryThread(); });
}

void CacheDir::RecoveryThread() {
  while (true) {
    int subdir = next_subdir_.fetch_add(1);
    if (subdir >= kSubdirCount) break;
    {
      MutexLock l(&mu_);
      if (stopping_) break;
      scan_state_[subdir] = ScanState::kListing;
    }
    Status s = ScanSubdir(subdir);
    if (!s.ok()) {
      spdlog::error("page store: recovery of {} failed: {}", layout_.SubdirPath(subdir),
                    s.ToString());
      MutexLock l(&mu_);
      scan_state_[subdir] = ScanState::kFailed;
      ++room_epoch_;
      room_cv_.NotifyAll();
    }
  }
  bool last;
  {
    MutexLock l(&mu_);
    last = --scanners_running_ == 0;
  }
  if (last) FinishRecovery();
}

Status CacheDir::ScanSubdir(int subdir) {
  const std::string dir = layout_.SubdirPath(subdir);
  auto listing = disk().ListDir(dir);
  if (!listing.ok()) listing = disk().ListDir(dir);  // Once more: a transient error costs a lot.
  if (!listing.ok()) return listing.status();

  std::vector<Found> found;
  uint64_t freed = 0;
  for (const DirEntry& e : *listing) {
    DirLayout::ParsedName name = DirLayout::ParseName(e.name);
    if (name.kind == DirLayout::NameKind::kPage && e.is_regular &&
        DirLayout::SubdirOf(name.id) == subdir) {
      found.push_back(Found{name.id, ChargeForFile(e.size), {}, {}});
      continue;
    }
    if (name.kind == DirLayout::NameKind::kTemp && name.nonce == nonce_) continue;  // Ours.
    if (e.is_dir) {
      spdlog::warn("page store: ignoring unexpected folder {}/{}", dir, e.name);
      continue;
    }
    // A temp file of a previous run (crashed mid-write), or something that is not a page under
    // a page-like name: this namespace is ours, and nothing can ever read it.
    Status s = disk().Unlink(dir + "/" + e.name);
    if (s.ok()) {
      freed += ChargeForFile(e.size);
    } else if (s.code() != StatusCode::kNotFound) {
      spdlog::warn("page store: cannot remove leftover {}/{}: {}", dir, e.name, s.ToString());
    }
  }

  const uint64_t epoch = RulesEpoch();
  AttributeFound(&found);
  if (shutting_down_.load(std::memory_order_relaxed)) return Status::Ok();

  {
    // Size the tables once from the first listing (sub-folders hold similar counts): growing a
    // hash table of a million entries rehashes it under the mutex, stalling lookups.
    MutexLock l(&mu_);
    if (!sized_for_scan_ && !found.empty()) {
      sized_for_scan_ = true;
      size_t expected = found.size() * kSubdirCount + found.size() * kSubdirCount / 8;
      index_.reserve(std::max(expected, index_.size()));
      policy_->Reserve(expected);
    }
  }
  for (size_t i = 0; i < found.size(); i += kScanBatch) {
    MutexLock l(&mu_);
    if (stopping_) return Status::Ok();
    size_t end = std::min(found.size(), i + kScanBatch);
    for (size_t j = i; j < end; ++j) AddRecoveredLocked(found[j]);
    ++room_epoch_;
    room_cv_.NotifyAll();  // Writers waiting for room during recovery can evict these now.
  }
  if (RulesEpoch() != epoch) RefileFound(found);
  MutexLock l(&mu_);
  space_.Credit(freed);
  scan_state_[subdir] = ScanState::kDone;
  ++room_epoch_;
  room_cv_.NotifyAll();
  return Status::Ok();
}

void CacheDir::AttributeFound(std::vector<Found>* found) {
  std::unordered_map<std::string, policy::EntryHints> resolved;  // Once per object.
  for (Found& page : *found) {
    if (shutting_down_.load(std::memory_order_relaxed)) return;
    auto key = ReadPageKey(disk(), layout_.PagePath(page.id));
    // Unreadable, or a header of another page under this name: default hints for now; the
    // first Open checks the file (and drops it, or files it under its rules).
    if (!key.ok() || Hash128Of(*key) != page.id) continue;
    page.object_id = std::string(ObjectIdOfKey(*key));
    auto [it, fresh] = resolved.try_emplace(page.object_id);
    if (fresh) it->second = Resolve(page.object_id);
    page.hints = it->second;
  }
}

void CacheDir::RefileFound(const std::vector<Found>& found) {
  // The rules changed while the scan resolved these pages, and the Reattribute that applies the
  // new ones may have walked the index before they were in it.
  for (size_t i = 0; i < found.size(); i += kRulesBatch) {
    std::vector<Attributed> batch;
    {
      MutexLock l(&mu_);
      for (size_t j = i; j < std::min(found.size(), i + kRulesBatch); ++j) {
        auto it = index_.find(found[j].id);
        if (it != index_.end() && it->second.object_id) {
          batch.push_back({found[j].id, it->second.object_id});
        }
      }
    }
    if (!batch.empty()) ApplyResolver(batch);
  }
}

void CacheDir::AddRecoveredLocked(const Found& page) {
  // Indexed already: published by a Put or adopted by a probe since the listing. Tombstoned or
  // dropping: dropped since, and the listing may predate the unlink. Publishing: the file is a
  // Put's new copy, about to be indexed by it.
  const Hash128& id = page.id;
  if (index_.count(id) || tombstones_.count(id) || dropping_.count(id) || publishing_.count(id)) {
    return;
  }
  std::shared_ptr<const std::string> object;
  if (!page.object_id.empty()) object = object_ids_.Intern(page.object_id);
  auto [it, inserted] = index_.emplace(
      id, Entry{page.charge, next_generation_++, /*is_cold=*/true, std::move(object)});
  // The file's age is not known without another stat: a restart starts the TTL over.
  if (inserted) it->second.cached_at_us = config_.clock->NowMicros();
  space_.Adopt(page.charge);
  ++recovered_pages_;
  ++cold_pages_;
  policy::EntryHints hints = page.hints;
  hints.cold = true;
  policy_->OnInsert(id, page.charge, hints);
}

void CacheDir::FinishRecovery() {
  bool complete;
  {
    MutexLock l(&mu_);
    complete = std::all_of(scan_state_.begin(), scan_state_.end(),
                           [](ScanState s) { return s == ScanState::kDone; });
    tombstones_.clear();  // No listing is in flight any more.
    if (complete) space_.MarkExact();
    int64_t ms = (config_.clock->NowMicros() - scan_start_micros_) / 1000;
    if (complete) {
      spdlog::info("page store: {} recovered {} pages ({} bytes in use) in {} ms", layout_.root(),
                   recovered_pages_, space_.used(), ms);
    } else if (!stopping_) {
      spdlog::error(
          "page store: {} could not be fully scanned; pages in the failed sub-folders "
          "are still served, and writes are admitted only against known free space",
          layout_.root());
    }
  }
  // The capacity may have been lowered since the pages were written.
  if (complete) EvictDownToCapacity();
  MutexLock l(&mu_);
  recovering_ = false;
  ++room_epoch_;
  room_cv_.NotifyAll();
}

void CacheDir::EvictDownToCapacity() {
  while (true) {
    std::vector<Victim> victims;
    {
      MutexLock l(&mu_);
      if (stopping_) return;
      PickVictimsLocked(space_.Excess(), /*in=*/nullptr, &victims);
    }
    if (victims.empty()) return;
    DropVictims(victims);
  }
}

}  // namespace cairn::pagestore
