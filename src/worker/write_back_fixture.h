// WriteBackTest: a WriteService with write-back on over a memory source behind fault
// injection, for the write-back tests (write_back_test.cc) and the readers of pending files
// (pending_reads_test.cc).
#ifndef CAIRN_WORKER_WRITE_BACK_FIXTURE_H_
#define CAIRN_WORKER_WRITE_BACK_FIXTURE_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <vector>

#include "common/checksum.h"
#include "testing/test_util.h"
#include "ufs/fault_injecting_ufs.h"
#include "ufs/memory_ufs.h"
#include "worker/write_service.h"

namespace cairn::worker {

constexpr uint32_t kPage = 256 * 1024;
constexpr uint64_t kPart = 64 << 10;

class WriteBackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    faults_ = std::make_shared<ufs::FaultInjectingUnderStorage>(memory_, /*seed=*/3);
    MountSpec lake;
    lake.path = "/lake";
    lake.uri = "mem://lake";
    lake.read_only = false;
    lake.write_back = true;
    mounts_ = *mount::MountTable::CreateWith({lake}, {faults_});
    pagestore::PageStoreOptions so;
    so.dirs.push_back({(dir_.path() / "cache").string(), 64ull << 20});
    so.page_size = kPage;
    store_ = std::move(pagestore::PageStore::Create(so)).value();
    PageServiceOptions po;
    po.page_size = kPage;
    pages_ = std::make_unique<PageService>(mounts_, store_.get(), &pages_registry_, po);
    Start();
  }

  // `adjust`, if given, changes the options last.
  void Start(uint64_t max_pending = 1ull << 30,
             std::chrono::milliseconds commit_delay = std::chrono::milliseconds(0),
             const std::function<void(WriteServiceOptions&)>& adjust = nullptr) {
    const Status started = TryStart(max_pending, commit_delay, adjust);
    ASSERT_TRUE(started.ok()) << started.ToString();
  }
  // Start, for a start that may be refused.
  Status TryStart(uint64_t max_pending = 1ull << 30,
                  std::chrono::milliseconds commit_delay = std::chrono::milliseconds(0),
                  const std::function<void(WriteServiceOptions&)>& adjust = nullptr) {
    writes_.reset();
    registry_ = std::make_unique<metrics::Registry>();
    WriteServiceOptions wo;
    wo.spool_dirs = {spool()};
    wo.part_size = kPart;
    wo.registry = registry_.get();
    wo.write_back.journal_path = (dir_.path() / "journal").string();
    wo.write_back.retry_min = std::chrono::milliseconds(5);
    wo.write_back.retry_max = std::chrono::milliseconds(20);
    wo.write_back.max_pending_bytes = max_pending;
    wo.write_back.full_wait = std::chrono::milliseconds(200);
    wo.write_back.commit_delay = commit_delay;
    wo.owner_of = owner_of_;
    if (adjust) adjust(wo);
    CAIRN_ASSIGN_OR_RETURN(writes_, WriteService::Create(pages_.get(), wo));
    return Status::Ok();
  }
  // Uploads fail (stat and reads still work: opens see the source).
  void SourceDown(bool down) {
    ufs::FaultSpec spec;
    spec.failure_probability = down ? 1.0 : 0.0;
    faults_->SetFault(ufs::UfsOp::kWrite, spec);
  }
  // Nothing works, not even a stat.
  void SourceUnreachable(bool down) {
    ufs::FaultSpec spec;
    spec.failure_probability = down ? 1.0 : 0.0;
    faults_->SetFaultAll(spec);
  }

  std::string spool() const { return (dir_.path() / "spool").string(); }
  // How many spool files (`write-*`) the spool folder holds.
  size_t SpoolFileCount() const {
    size_t count = 0;
    for (const auto& e : std::filesystem::directory_iterator(spool())) {
      count += e.is_regular_file() && e.path().filename().string().rfind("write-", 0) == 0;
    }
    return count;
  }

  StatusOr<protocol::WriteReply> Open(const std::string& path, bool truncate = true) {
    protocol::OpenWriteRequest r;
    r.path = path;
    r.create = true;
    r.truncate = truncate;
    return writes_->Serve("team-a", r);
  }
  Status Write(uint64_t handle, uint64_t offset, std::string_view data) {
    protocol::WritePageRequest r;
    r.handle = handle;
    r.offset = offset;
    r.data = std::span<const char>(data.data(), data.size());
    r.checksums = ChunkChecksums(r.data);
    return writes_->Serve("team-a", r).status();
  }
  StatusOr<protocol::WriteReply> Close(uint64_t handle) {
    return writes_->Serve("team-a", protocol::CloseWriteRequest{0, handle});
  }
  // Open, write `data`, close: the close's reply.
  StatusOr<protocol::WriteReply> WriteFile(const std::string& path, const std::string& data) {
    CAIRN_ASSIGN_OR_RETURN(protocol::WriteReply opened, Open(path));
    CAIRN_RETURN_IF_ERROR(Write(opened.handle, 0, data));
    return Close(opened.handle);
  }
  Status Remove(const std::string& path) {
    protocol::RemovePathRequest r;
    r.path = path;
    return writes_->Serve("team-a", r).status();
  }
  Status Rename(const std::string& from, const std::string& to, bool no_replace = false) {
    protocol::RenameRequest r;
    r.from = from;
    r.to = to;
    r.no_replace = no_replace;
    return writes_->Serve("team-a", r).status();
  }
  // Whether `path` has a file waiting for its upload.
  bool Pending(const std::string& path) { return writes_->write_back()->HasPending(path); }
  Status SyncAll() { return writes_->SyncPath("/", std::chrono::seconds(20)); }
  double Metric(const std::string& name) {
    return testing::MetricValue(registry_->ExposeText(), name);
  }
  std::string Content(const std::string& key) { return testing::ObjectContent(*memory_, key); }
  bool InSource(const std::string& key) { return memory_->Stat(key).ok(); }
  // The sizes of the files set aside in the spool's conflicts/ folder (none without it).
  std::vector<uintmax_t> ConflictSizes() const {
    std::vector<uintmax_t> sizes;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(spool() + "/conflicts", ec)) {
      sizes.push_back(std::filesystem::file_size(e.path()));
    }
    return sizes;
  }

  testing::TempDir dir_{"write-back"};
  std::unique_ptr<metrics::Registry> registry_ = std::make_unique<metrics::Registry>();
  metrics::Registry pages_registry_;
  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<ufs::FaultInjectingUnderStorage> faults_;
  std::shared_ptr<const mount::MountTable> mounts_;
  std::unique_ptr<pagestore::PageStore> store_;
  std::unique_ptr<PageService> pages_;
  std::unique_ptr<WriteService> writes_;
  // WriteServiceOptions::owner_of of the next Start (unset: no other workers).
  std::function<StatusOr<std::shared_ptr<protocol::PageChannel>>(const std::string&)> owner_of_;
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_WRITE_BACK_FIXTURE_H_
