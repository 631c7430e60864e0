// PageStore: routes each page to one of the cache folders (CacheDir), sums their stats, spreads
// group quotas over them and runs the TTL sweeper.
#include "pagestore/page_store.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "common/thread_annotations.h"
#include "pagestore/cache_dir.h"
#include "pagestore/disk.h"
#include "pagestore/layout.h"
#include "pagestore/page_file.h"

namespace cairn::pagestore {
namespace {

// Jump consistent hash (Lamping & Veach, 2014): maps `key` to [0, buckets) so that growing the
// bucket count from n to n+1 moves only 1/(n+1) of the keys, all to the new bucket.
int JumpConsistentHash(uint64_t key, int buckets) {
  int64_t b = -1;
  int64_t j = 0;
  while (j < buckets) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) * (static_cast<double>(1LL << 31) /
                                                           static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<int>(b);
}

// The folder of a page: stable while the folder list keeps its order.
size_t DirIndex(const Hash128& id, size_t dirs) {
  return static_cast<size_t>(JumpConsistentHash(id.low, static_cast<int>(dirs)));
}

Status CheckKey(const PageKey& key) {
  if (key.object_id.find('\0') != std::string::npos ||
      key.version.find('\0') != std::string::npos) {
    return InvalidArgumentError("page key fields must not contain NUL bytes");
  }
  return Status::Ok();
}

// The sweeper wakes at the next deadline, and at least this often (deadlines set by Put or
// Reattribute after it went to sleep are not waited for).
constexpr int64_t kMaxSweepIntervalMicros = 1'000'000;

class PageStoreImpl final : public PageStore {
 public:
  PageStoreImpl(std::vector<std::unique_ptr<CacheDir>> dirs, uint32_t page_size, Clock* clock,
                std::shared_ptr<AttributeSource> attributes)
      : dirs_(std::move(dirs)),
        page_size_(page_size),
        clock_(clock),
        attributes_(std::move(attributes)),
        sweeper_([this] { SweepLoop(); }) {}

  ~PageStoreImpl() override {
    {
      MutexLock l(&sweep_mu_);
      stop_sweeper_ = true;
    }
    sweep_cv_.NotifyAll();
    sweeper_.join();
  }

  StatusOr<std::unique_ptr<PageReader>> Open(const PageKey& key) override {
    CAIRN_RETURN_IF_ERROR(CheckKey(key));
    KeyInfo info(key);
    return DirFor(info).OpenPage(info);
  }

  Status Put(const PageKey& key, std::span<const char> data) override {
    std::vector<uint64_t> sums = ChunkChecksums(data);
    return PutWithChecksums(key, data, sums);
  }

  Status PutWithChecksums(const PageKey& key, std::span<const char> data,
                          std::span<const uint64_t> checksums) override {
    return PutAt(key, data, checksums, std::nullopt);
  }

  Status PutWithPriority(const PageKey& key, std::span<const char> data,
                         std::span<const uint64_t> checksums, policy::Priority priority) override {
    return PutAt(key, data, checksums, priority);
  }

  Status PutAt(const PageKey& key, std::span<const char> data, std::span<const uint64_t> checksums,
               std::optional<policy::Priority> priority) {
    CAIRN_RETURN_IF_ERROR(CheckKey(key));
    if (checksums.size() != ChunkCount(data.size())) {
      return InvalidArgumentError("checksum count does not match the page data");
    }
    if (data.size() > page_size_) {
      return InvalidArgumentError("page of " + std::to_string(data.size()) +
                                  " bytes is larger than the page size " +
                                  std::to_string(page_size_));
    }
    KeyInfo info(key);
    return DirFor(info).Put(info, data, checksums, priority);
  }

  Status Remove(const PageKey& key, RemoveReason reason) override {
    CAIRN_RETURN_IF_ERROR(CheckKey(key));
    KeyInfo info(key);
    return DirFor(info).Remove(info, reason);
  }

  Status RemoveCopy(const PageKey& key, uint64_t copy_id, RemoveReason reason) override {
    CAIRN_RETURN_IF_ERROR(CheckKey(key));
    if (copy_id == 0) return InvalidArgumentError("RemoveCopy needs the copy id of a reader");
    KeyInfo info(key);
    return DirFor(info).RemoveCopy(info, copy_id, reason);
  }

  bool Contains(const PageKey& key) override {
    if (!CheckKey(key).ok()) return false;
    KeyInfo info(key);
    return DirFor(info).Contains(info);
  }

  PageStoreStats Stats() const override {
    PageStoreStats total;
    for (const auto& dir : dirs_) {
      PageStoreStats s = dir->Stats();
      total.pages += s.pages;
      total.used_bytes += s.used_bytes;
      total.capacity_bytes += s.capacity_bytes;
      total.pinned_bytes += s.pinned_bytes;
      total.evictions += s.evictions;
      total.capacity_evictions += s.capacity_evictions;
      total.quota_evictions += s.quota_evictions;
      total.expired_pages += s.expired_pages;
      total.freed_pages += s.freed_pages;
      total.invalidated_pages += s.invalidated_pages;
      total.corrupt_pages += s.corrupt_pages;
      total.recovered_pages += s.recovered_pages;
      total.recovering = total.recovering || s.recovering;
    }
    return total;
  }

  void SetAttributeResolver(AttributeResolver resolver) override {
    attributes_->Set(std::move(resolver));
  }

  void Reattribute() override {
    // Before the walk: a Put that resolved under the old rules and publishes after the walk
    // passed its place sees the change and resolves again.
    attributes_->MarkRulesChanged();
    for (const auto& dir : dirs_) dir->Reattribute();
    sweep_cv_.NotifyAll();  // New deadlines may be earlier than the sweeper's next wake-up.
  }

  void SetGroupQuota(uint32_t group, uint64_t bytes) override {
    uint64_t total = 0;
    for (const auto& dir : dirs_) total += dir->Stats().capacity_bytes;
    for (const auto& dir : dirs_) {
      uint64_t share = 0;
      if (bytes != 0 && total != 0) {
        unsigned __int128 scaled =
            static_cast<unsigned __int128>(bytes) * dir->Stats().capacity_bytes / total;
        // At least 1 byte: a share of 0 would mean "no quota" in that folder.
        share = std::max<uint64_t>(1, static_cast<uint64_t>(scaled));
      }
      dir->SetGroupQuota(group, share);
    }
  }

  uint64_t GroupBytes(uint32_t group) const override {
    uint64_t total = 0;
    for (const auto& dir : dirs_) total += dir->GroupBytes(group);
    return total;
  }

  size_t SweepExpired() override { return SweepAll(); }

 private:
  // Non-virtual: the sweeper thread starts inside the constructor.
  size_t SweepAll() {
    const int64_t now = clock_->NowMicros();
    size_t dropped = 0;
    for (const auto& dir : dirs_) dropped += dir->SweepExpired(now);
    return dropped;
  }

  // The TTL sweeper thread: sweeps every folder, then sleeps until the earliest deadline left or
  // for kMaxSweepIntervalMicros, whichever is sooner (deadlines are on clock_, the sleep on real
  // time: with a FakeClock it simply polls once a second).
  void SweepLoop() EXCLUDES(sweep_mu_) {
    while (true) {
      SweepAll();
      int64_t wait_us = kMaxSweepIntervalMicros;
      const int64_t now = clock_->NowMicros();
      for (const auto& dir : dirs_) {
        if (std::optional<int64_t> next = dir->NextExpiry()) {
          wait_us = std::min(wait_us, std::max<int64_t>(*next - now, 0));
        }
      }
      // At least 1 ms: a deadline that passed between the sweep and now is taken next round.
      wait_us = std::max<int64_t>(wait_us, 1000);
      MutexLock l(&sweep_mu_);
      if (sweep_cv_.WaitFor(&sweep_mu_, std::chrono::microseconds(wait_us),
                            [this]() REQUIRES(sweep_mu_) { return stop_sweeper_; })) {
        return;
      }
    }
  }

  // The low word of the id; the sub-folder inside a folder uses the top byte of the high word,
  // so the two choices are independent.
  CacheDir& DirFor(const KeyInfo& info) { return *dirs_[DirIndex(info.id, dirs_.size())]; }

  const std::vector<std::unique_ptr<CacheDir>> dirs_;
  const uint32_t page_size_;
  Clock* const clock_;
  const std::shared_ptr<AttributeSource> attributes_;
  Mutex sweep_mu_;
  CondVar sweep_cv_;  // Stop, or deadlines may have moved earlier.
  bool stop_sweeper_ GUARDED_BY(sweep_mu_) = false;
  std::thread sweeper_;  // Last: starts after everything it uses is constructed.
};

}  // namespace

StatusOr<std::unique_ptr<PageStore>> PageStore::Create(const PageStoreOptions& options) {
  if (options.dirs.empty()) return InvalidArgumentError("page store needs at least one folder");
  if (options.page_size == 0 || options.page_size > kMaxPageDataLength) {
    return InvalidArgumentError("page size must be between 1 byte and 1 GiB");
  }
  std::set<std::string> seen;
  for (const CacheDirOptions& d : options.dirs) {
    std::string path = DirLayout(d.path).root();
    if (!seen.insert(path).second) {
      return InvalidArgumentError("cache folder " + path + " is listed twice");
    }
  }
  Clock* clock = options.clock ? options.clock : Clock::Real();
  auto attributes = std::make_shared<AttributeSource>(options.attributes);
  std::vector<std::unique_ptr<CacheDir>> dirs;
  for (const CacheDirOptions& d : options.dirs) {
    CacheDir::Config config;
    config.path = d.path;
    config.capacity_bytes = d.capacity_bytes;
    config.page_size = options.page_size;
    config.eviction_policy = options.eviction_policy;
    config.recovery_threads = options.recovery_threads_per_dir;
    config.disk = options.disk ? options.disk : PosixDisk();
    config.clock = clock;
    config.attributes = attributes;
    config.on_evict = options.on_evict;
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<CacheDir> dir, CacheDir::Open(std::move(config)));
    dirs.push_back(std::move(dir));
  }
  return std::unique_ptr<PageStore>(std::make_unique<PageStoreImpl>(
      std::move(dirs), options.page_size, clock, std::move(attributes)));
}

StatusOr<std::unique_ptr<PageReader>> OpenPageReadOnly(const std::vector<std::string>& dirs,
                                                       const PageKey& key) {
  if (dirs.empty()) return InvalidArgumentError("no cache folders");
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  KeyInfo info(key);
  DirLayout layout(dirs[DirIndex(info.id, dirs.size())]);
  static const std::shared_ptr<Disk> disk = PosixDisk();
  auto reader = OpenPageFile(*disk, layout.PagePath(info.id), info.serialized, info.page_index);
  if (!reader.ok()) return reader.status();
  return std::unique_ptr<PageReader>(std::move(reader).value());
}

}  // namespace cairn::pagestore
