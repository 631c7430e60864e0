#include "worker/write_service.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <set>
#include <string>
#include <utility>

#include "common/checksum.h"
#include "testing/frames.h"
#include "testing/gate.h"
#include "testing/gated_ufs.h"
#include "testing/test_util.h"
#include "ufs/counting_ufs.h"
#include "ufs/memory_ufs.h"

namespace cairn::worker {
namespace {

constexpr uint32_t kPage = 256 * 1024;
constexpr uint64_t kPart = 64 << 10;

class WriteServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    auto other = std::make_shared<ufs::MemoryUnderStorage>("mem://frozen");
    scratch_ = std::make_shared<ufs::MemoryUnderStorage>("mem://scratch");
    MountSpec lake;
    lake.path = "/lake";
    lake.uri = "mem://lake";
    lake.read_only = false;
    MountSpec frozen;
    frozen.path = "/frozen";
    frozen.uri = "mem://frozen";
    MountSpec scratch;
    scratch.path = "/scratch";
    scratch.uri = "mem://scratch";
    scratch.read_only = false;
    gated_ = std::make_shared<testing::GatedUnderStorage>(memory_);
    lake_ = std::make_shared<ufs::CountingUnderStorage>(gated_);
    mounts_ = *mount::MountTable::CreateWith({lake, frozen, scratch}, {lake_, other, scratch_});
    pagestore::PageStoreOptions so;
    so.dirs.push_back({(dir_.path() / "cache").string(), 64ull << 20});
    so.page_size = kPage;
    store_ = std::move(pagestore::PageStore::Create(so)).value();
    PageServiceOptions po;
    po.page_size = kPage;
    pages_ = std::make_unique<PageService>(mounts_, store_.get(), &registry_, po);
    Start();
  }

  void Start(size_t per_principal = 1024) {
    writes_.reset();
    WriteServiceOptions wo;
    wo.spool_dirs = {spool()};
    wo.part_size = kPart;
    wo.clock = &clock_;
    wo.idle_timeout = std::chrono::seconds(60);
    wo.max_open_files_per_principal = per_principal;
    wo.registry = &registry_;
    writes_ = std::move(WriteService::Create(pages_.get(), wo)).value();
  }

  std::string spool() const { return (dir_.path() / "spool").string(); }
  size_t SpoolFiles() const { return SpoolNames().size(); }
  std::set<std::string> SpoolNames() const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(spool())) {
      names.insert(e.path().filename().string());
    }
    return names;
  }

  StatusOr<protocol::WriteReply> Open(const std::string& path, bool create = true,
                                      bool exclusive = false, bool truncate = true,
                                      const std::string& who = "team-a") {
    protocol::OpenWriteRequest r;
    r.path = path;
    r.create = create;
    r.exclusive = exclusive;
    r.truncate = truncate;
    return writes_->Serve(who, r);
  }
  StatusOr<protocol::WriteReply> Write(uint64_t handle, uint64_t offset, std::string_view data,
                                       const std::string& who = "team-a") {
    return writes_->Serve(who, testing::WritePageOf(handle, offset, data));
  }
  StatusOr<protocol::WriteReply> Close(uint64_t handle, const std::string& who = "team-a") {
    return writes_->Serve(who, protocol::CloseWriteRequest{0, handle});
  }
  StatusOr<protocol::WriteReply> Sync(uint64_t handle) {
    return writes_->Serve("team-a", protocol::SyncWriteRequest{0, handle});
  }
  StatusOr<protocol::WriteReply> Rename(const std::string& from, const std::string& to,
                                        bool no_replace = false) {
    protocol::RenameRequest r;
    r.from = from;
    r.to = to;
    r.no_replace = no_replace;
    return writes_->Serve("team-a", r);
  }
  StatusOr<protocol::WriteReply> MakeDir(const std::string& path) {
    protocol::MakeDirRequest r;
    r.path = path;
    return writes_->Serve("team-a", r);
  }
  StatusOr<protocol::WriteReply> RemoveDir(const std::string& path) {
    protocol::RemovePathRequest r;
    r.path = path;
    r.directory = true;
    return writes_->Serve("team-a", r);
  }
  double Counter(const std::string& name) {
    return testing::MetricValue(registry_.ExposeText(), name);
  }
  std::string Content(const std::string& key) { return testing::ObjectContent(*memory_, key); }

  testing::TempDir dir_{"write-service"};
  FakeClock clock_;
  metrics::Registry registry_;
  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<testing::GatedUnderStorage> gated_;  // memory_, its commits held on demand.
  std::shared_ptr<ufs::CountingUnderStorage> lake_;    // The /lake mount's source: gated_, counted.
  std::shared_ptr<ufs::MemoryUnderStorage> scratch_;
  std::shared_ptr<const mount::MountTable> mounts_;
  std::unique_ptr<pagestore::PageStore> store_;
  std::unique_ptr<PageService> pages_;
  std::unique_ptr<WriteService> writes_;
};

TEST_F(WriteServiceTest, AFileAppearsWholeAtCloseAndItsHandleIsGone) {
  const std::string content = testing::RandomBytes(5 * kPart + 1234, 1);
  auto opened = Open("/lake/ckpt/step-1.pt");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const uint64_t h = opened->handle;
  EXPECT_NE(h, 0u);
  // Out of order, in pieces, as a zip writer patches its header last.
  ASSERT_TRUE(Write(h, 4096, std::string_view(content).substr(4096)).ok());
  ASSERT_TRUE(Write(h, 0, std::string_view(content).substr(0, 4096)).ok());
  EXPECT_EQ(memory_->Stat("ckpt/step-1.pt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(writes_->open_files(), 1u);

  auto closed = Close(h);
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(closed->size, content.size());
  EXPECT_EQ(closed->version, memory_->Stat("ckpt/step-1.pt")->version);
  EXPECT_EQ(Content("ckpt/step-1.pt"), content);
  EXPECT_EQ(writes_->open_files(), 0u);
  EXPECT_EQ(SpoolFiles(), 0u);
  EXPECT_EQ(Write(h, 0, "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Close(h).status().code(), StatusCode::kNotFound);
}

// ServeNow is for a connection's reader: a request of a file whose commit is uploading waits
// for it elsewhere (handed off when it ends), and so does the first write after a commit (it
// copies the committed file); a request that comes while requests handed off are not served
// yet waits for them (none lands after a later one).
TEST_F(WriteServiceTest, ServeNowLeavesForLaterWhatWouldWaitForACommitOrCopyTheFile) {
  auto commits = std::make_shared<testing::Gate>();
  gated_->set_commit_gate(commits);
  auto opened = Open("/lake/log");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const uint64_t h = opened->handle;
  std::atomic<int> parked{0};
  Mutex mu;
  std::vector<std::shared_ptr<void>> holds;  // Of the requests handed off, not yet served.
  const WriteService::ParkFn park = [&]() -> WriteService::ResumeFn {
    ++parked;
    return [&](std::shared_ptr<void> hold) {
      MutexLock l(&mu);
      holds.push_back(std::move(hold));
    };
  };
  auto handed_off = [&] {
    MutexLock l(&mu);
    return holds.size();
  };
  auto serve_handed_off = [&] {  // As the server's pool does: serve, then drop the hold.
    std::vector<std::shared_ptr<void>> served;
    {
      MutexLock l(&mu);
      served.swap(holds);
    }
    served.clear();  // No lock held: the release may hand off more.
  };
  auto write = [&](uint64_t offset, std::string_view data) {
    return writes_->ServeNow("team-a", testing::WritePageOf(h, offset, data), park);
  };
  auto now = write(0, "abc");
  ASSERT_TRUE(now.has_value() && now->ok());
  EXPECT_EQ(now->value().size, 3u);

  StatusOr<protocol::WriteReply> synced = InternalError("not yet");
  std::thread sync([&] { synced = Sync(h); });
  ASSERT_TRUE(commits->WaitForArrivals(1));
  EXPECT_FALSE(write(3, "def").has_value());
  EXPECT_FALSE(writes_->ServeNow("team-a", protocol::ReadWrittenRequest{0, h, 0, 3}, park));
  auto keep = writes_->ServeNow("team-a", protocol::KeepWriteRequest{0, h}, park);
  EXPECT_TRUE(keep.has_value() && keep->ok());  // A keep-alive never waits.
  auto foreign = writes_->ServeNow("team-b", protocol::KeepWriteRequest{0, h}, park);
  ASSERT_TRUE(foreign.has_value());
  EXPECT_EQ(foreign->status().code(), StatusCode::kNotFound);
  EXPECT_EQ(parked.load(), 2);
  EXPECT_EQ(handed_off(), 0u);
  commits->Open();
  sync.join();
  ASSERT_TRUE(synced.ok()) << synced.status().ToString();
  EXPECT_EQ(handed_off(), 2u);
  // While those two are not served, a later request waits for them.
  EXPECT_FALSE(write(3, "def").has_value());
  EXPECT_EQ(parked.load(), 3);
  EXPECT_EQ(handed_off(), 2u);
  ASSERT_TRUE(Write(h, 3, "def").ok());  // Serves the first (the new session's copy).
  serve_handed_off();
  EXPECT_EQ(handed_off(), 1u);  // The third, handed off once the first two were served.
  ASSERT_TRUE(Write(h, 3, "def").ok());
  serve_handed_off();

  // Committed again: the next write copies the file, handed off at once; the one after it
  // waits until it is served.
  ASSERT_TRUE(Sync(h).ok());
  EXPECT_FALSE(write(6, "ghi").has_value());
  EXPECT_EQ(handed_off(), 1u);
  EXPECT_FALSE(write(9, "jkl").has_value());
  EXPECT_EQ(handed_off(), 1u);
  ASSERT_TRUE(Write(h, 6, "ghi").ok());
  serve_handed_off();
  ASSERT_EQ(handed_off(), 1u);
  ASSERT_TRUE(Write(h, 9, "jkl").ok());
  serve_handed_off();
  auto more = write(12, "mn");  // Nothing waits any more: answered at once.
  ASSERT_TRUE(more.has_value() && more->ok());
  ASSERT_TRUE(Close(h).ok());
  EXPECT_EQ(Content("log"), "abcdefghijklmn");
  EXPECT_EQ(parked.load(), 5);
}

// A commit uploading one path (minutes, for a large file) holds up no other path's remove,
// rename or commit: each path has its own lock. Until 12-07 paths shared 64 locks by hash, and
// the name below shared the uploading file's: its remove waited for the whole upload.
TEST_F(WriteServiceTest, ALongCommitOfOnePathHoldsUpNoOtherPath) {
  const std::string big = "/lake/big.bin";
  std::string other;
  for (int i = 0; other.empty(); ++i) {
    const std::string name = "/lake/other-" + std::to_string(i);
    if (Hash64(name) % 64 == Hash64(big) % 64) other = name;
  }
  ASSERT_TRUE(memory_->Write(other.substr(6), std::span<const char>("old", 3)).ok());
  auto commits = std::make_shared<testing::Gate>();
  gated_->set_commit_gate(commits);
  auto opened = Open(big);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_TRUE(Write(opened->handle, 0, "checkpoint").ok());
  StatusOr<protocol::WriteReply> closed = InternalError("not yet");
  std::thread closer([&] { closed = Close(opened->handle); });
  struct Joiner {  // Whatever fails below, the close ends and is joined.
    testing::Gate& gate;
    std::thread& thread;
    ~Joiner() {
      gate.Open();
      if (thread.joinable()) thread.join();
    }
  } joiner{*commits, closer};
  ASSERT_TRUE(commits->WaitForArrivals(1));  // Its upload is under way, its path locked.

  auto removed = std::async(std::launch::async, [&] {
    protocol::RemovePathRequest r;
    r.path = other;
    return writes_->Serve("team-a", r).status();
  });
  EXPECT_EQ(removed.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "a remove of " << other << " waited for the upload of " << big;
  commits->Open();
  closer.join();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_TRUE(removed.get().ok());
  EXPECT_EQ(Content("big.bin"), "checkpoint");
  EXPECT_EQ(memory_->Stat(other.substr(6)).status().code(), StatusCode::kNotFound);
}

TEST_F(WriteServiceTest, WhereNoFileCanBeWrittenTheOpenSaysWhy) {
  EXPECT_EQ(Open("/frozen/x").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Open("/").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Open("/lake").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Open("/lake//x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Open("/lake/x/").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Open("/elsewhere/x").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(Open("/lake/missing", /*create=*/false).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(memory_->Write("there", std::span<const char>("abc", 3)).ok());
  EXPECT_EQ(Open("/lake/there", true, /*exclusive=*/true).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(writes_->open_files(), 0u);
  EXPECT_EQ(SpoolFiles(), 0u);
}

// A directory is no file to write (FUSE's lookup rules it out in the kernel; a library
// client has only the worker's check): the name would become a file and a directory at once.
TEST_F(WriteServiceTest, ADirectoryIsNotOpenedForWriting) {
  ASSERT_TRUE(memory_->Write("ckpt/run1/a.pt", std::span<const char>("abc", 3)).ok());
  for (const char* dir : {"/lake/ckpt", "/lake/ckpt/run1"}) {
    const Status refused = Open(dir).status();
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << dir;
    EXPECT_NE(refused.message().find("is a directory"), std::string::npos) << refused.ToString();
  }
  EXPECT_EQ(writes_->open_files(), 0u);
  EXPECT_FALSE(memory_->Stat("ckpt").ok());
  ASSERT_TRUE(Open("/lake/ckpt/run1/b.pt").ok());  // Files in it are.
}

TEST_F(WriteServiceTest, AnOpenWithoutTruncateStartsFromTheCurrentContent) {
  const std::string old = testing::RandomBytes(3 * kPart + 10, 2);
  ASSERT_TRUE(memory_->Write("f", old).ok());
  auto opened = Open("/lake/f", /*create=*/false, false, /*truncate=*/false);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->size, old.size());
  ASSERT_TRUE(Write(opened->handle, kPart, "patched").ok());
  ASSERT_TRUE(Close(opened->handle).ok());
  std::string expected = old;
  expected.replace(kPart, 7, "patched");
  EXPECT_EQ(Content("f"), expected);
}

TEST_F(WriteServiceTest, DataThatDoesNotMatchItsChecksumsIsRefused) {
  auto opened = Open("/lake/f");
  ASSERT_TRUE(opened.ok());
  protocol::WritePageRequest r;
  r.handle = opened->handle;
  std::string data = "hello";
  r.data = std::span<const char>(data.data(), data.size());
  r.checksums = {ChunkChecksums(r.data)[0] ^ 1};
  EXPECT_EQ(writes_->Serve("team-a", r).status().code(), StatusCode::kCorruption);
  auto closed = Close(opened->handle);
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(closed->size, 0u);  // Nothing of the damaged write was kept.
}

TEST_F(WriteServiceTest, AHandleIsUsableOnlyByThePrincipalThatOpenedIt) {
  auto opened = Open("/lake/f");
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(Write(opened->handle, 0, "x", "team-b").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Close(opened->handle, "team-b").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(
      writes_->Serve("team-b", protocol::AbortWriteRequest{0, opened->handle}).status().code(),
      StatusCode::kNotFound);
  EXPECT_EQ(writes_->open_files(), 1u);
  EXPECT_TRUE(Write(opened->handle, 0, "x").ok());
}

TEST_F(WriteServiceTest, SyncCommitsAndWritingGoesOnFromTheSyncedContent) {
  auto opened = Open("/lake/log");
  ASSERT_TRUE(opened.ok());
  const uint64_t h = opened->handle;
  ASSERT_TRUE(Write(h, 0, "first line\n").ok());
  auto synced = Sync(h);
  ASSERT_TRUE(synced.ok()) << synced.status().ToString();
  EXPECT_EQ(Content("log"), "first line\n");
  // A close with nothing written since the sync commits nothing more.
  auto again = Sync(h);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->version, synced->version);

  // The write goes on in the committed spool file, taken over (not copied: seconds per GB).
  const std::set<std::string> committed_spool = SpoolNames();
  EXPECT_EQ(committed_spool.size(), 1u);
  ASSERT_TRUE(Write(h, 11, "second line\n").ok());
  EXPECT_EQ(SpoolNames(), committed_spool);
  auto closed = Close(h);
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_NE(closed->version, synced->version);
  EXPECT_EQ(Content("log"), "first line\nsecond line\n");
  EXPECT_EQ(SpoolFiles(), 0u);
}

TEST_F(WriteServiceTest, OfTwoWritersOfOnePathTheLastToCloseWins) {
  auto a = Open("/lake/same");
  auto b = Open("/lake/same");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(Write(a->handle, 0, "from a").ok());
  ASSERT_TRUE(Write(b->handle, 0, "from b, longer").ok());
  ASSERT_TRUE(Close(a->handle).ok());
  EXPECT_EQ(Content("same"), "from a");
  auto closed_b = Close(b->handle);
  ASSERT_TRUE(closed_b.ok()) << closed_b.status().ToString();
  EXPECT_EQ(Content("same"), "from b, longer");
}

// Runs `after_read` once, after the first Read (an open without truncate reads what the file
// starts from).
class AfterReadUfs : public ufs::UnderStorageWrapper {
 public:
  using UnderStorageWrapper::UnderStorageWrapper;
  StatusOr<size_t> Read(std::string_view key, std::string_view version, uint64_t offset,
                        std::span<char> out) override {
    StatusOr<size_t> n = UnderStorageWrapper::Read(key, version, offset, out);
    if (auto hook = std::exchange(after_read, nullptr)) hook();
    return n;
  }
  std::function<void()> after_read;
};

// Another writer's close that lands while an open reads the content it starts from: the open
// is not yet among the path's open files, so the close cannot tell it that the file moved on
// (AdoptCommit). It catches up once entered, and the last close still wins, as between two
// writers already open.
TEST_F(WriteServiceTest, AnOpenCatchesUpWithACommitMadeWhileItReadTheContent) {
  auto hooked = std::make_shared<AfterReadUfs>(memory_);
  MountSpec lake;
  lake.path = "/lake";
  lake.uri = "mem://lake";
  lake.read_only = false;
  auto mounts = *mount::MountTable::CreateWith({lake}, {hooked});
  metrics::Registry registry;
  PageServiceOptions po;
  po.page_size = kPage;
  PageService pages(mounts, store_.get(), &registry, po);
  WriteServiceOptions wo;
  wo.spool_dirs = {spool() + "-hooked"};
  wo.part_size = kPart;
  wo.registry = &registry;
  auto writes = std::move(WriteService::Create(&pages, wo)).value();
  auto open = [&](const std::string& who, bool truncate) {
    protocol::OpenWriteRequest r;
    r.path = "/lake/log";
    r.create = true;
    r.truncate = truncate;
    return writes->Serve(who, r);
  };
  auto write = [&](const std::string& who, uint64_t handle, uint64_t offset,
                   std::string_view data) {
    return writes->Serve(who, testing::WritePageOf(handle, offset, data)).status();
  };
  ASSERT_TRUE(memory_->Write("log", std::span<const char>("line 1\n", 7)).ok());
  hooked->after_read = [&] {
    auto other = open("team-b", /*truncate=*/true);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    ASSERT_TRUE(write("team-b", other->handle, 0, "rewritten\n").ok());
    ASSERT_TRUE(writes->Serve("team-b", protocol::CloseWriteRequest{0, other->handle}).ok());
  };
  auto opened = open("team-a", /*truncate=*/false);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(Content("log"), "rewritten\n");  // The other close landed during the open.
  ASSERT_TRUE(write("team-a", opened->handle, 7, "line 2\n").ok());
  auto closed = writes->Serve("team-a", protocol::CloseWriteRequest{0, opened->handle});
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(Content("log"), "line 1\nline 2\n");
}

TEST_F(WriteServiceTest, AChangeMadeElsewhereFailsTheCommitAndKeepsTheHandle) {
  ASSERT_TRUE(memory_->Write("shared", std::span<const char>("v0", 2)).ok());
  auto opened = Open("/lake/shared");
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(Write(opened->handle, 0, "mine").ok());
  ASSERT_TRUE(memory_->Write("shared", std::span<const char>("theirs", 6)).ok());
  EXPECT_EQ(Close(opened->handle).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Content("shared"), "theirs");
  EXPECT_EQ(writes_->open_files(), 1u);  // The client may abort (or retry).
  EXPECT_TRUE(writes_->Serve("team-a", protocol::AbortWriteRequest{0, opened->handle}).ok());
  EXPECT_EQ(writes_->open_files(), 0u);
  EXPECT_EQ(SpoolFiles(), 0u);
}

// A create right after the client's lookup found nothing (seen_absent) asks the source nothing
// at open, and its commit is conditional on the name being absent.
TEST_F(WriteServiceTest, ACreateTheClientSawAbsentSkipsTheSourceStatAndCommitsIfStillAbsent) {
  protocol::OpenWriteRequest r{0, "/lake/ckpt/shard-0.pt", true, false, true};
  r.seen_absent = true;
  lake_->Reset();
  auto opened = writes_->Serve("team-a", r);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(lake_->counts().stats, 0u);
  EXPECT_EQ(Counter("cairn_worker_write_opens_seen_absent_total"), 1);
  ASSERT_TRUE(Write(opened->handle, 0, "shard").ok());
  ASSERT_TRUE(Close(opened->handle).ok());
  EXPECT_EQ(Content("ckpt/shard-0.pt"), "shard");

  // The client was wrong (or the object appeared since): the commit fails, the object stays.
  ASSERT_TRUE(memory_->Write("ckpt/shard-1.pt", std::span<const char>("theirs", 6)).ok());
  r.path = "/lake/ckpt/shard-1.pt";
  opened = writes_->Serve("team-a", r);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_TRUE(Write(opened->handle, 0, "mine").ok());
  EXPECT_EQ(Close(opened->handle).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Content("ckpt/shard-1.pt"), "theirs");
}

// The claim is taken only for an open that replaces whatever is there: an exclusive create must
// say AlreadyExists at open, and an open that keeps the content must read it.
TEST_F(WriteServiceTest, SeenAbsentIsIgnoredByOpensThatDependOnTheContent) {
  ASSERT_TRUE(memory_->Write("there", std::span<const char>("abc", 3)).ok());
  protocol::OpenWriteRequest exclusive{0, "/lake/there", true, true, true};
  exclusive.seen_absent = true;
  EXPECT_EQ(writes_->Serve("team-a", exclusive).status().code(), StatusCode::kAlreadyExists);
  protocol::OpenWriteRequest keep{0, "/lake/there", true, false, false};
  keep.seen_absent = true;
  auto opened = writes_->Serve("team-a", keep);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->size, 3u);
  EXPECT_EQ(Counter("cairn_worker_write_opens_seen_absent_total"), 0);
}

TEST_F(WriteServiceTest, AnExclusiveCreateLosesToAWriterThatClosedFirst) {
  auto exclusive = Open("/lake/new", true, /*exclusive=*/true);
  auto plain = Open("/lake/new");
  ASSERT_TRUE(exclusive.ok() && plain.ok());
  ASSERT_TRUE(Close(plain->handle).ok());
  EXPECT_EQ(Close(exclusive->handle).status().code(), StatusCode::kAlreadyExists);
}

TEST_F(WriteServiceTest, ACommitRecheckThatRefusesLeavesNothingWritten) {
  auto opened = Open("/lake/f");
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(Write(opened->handle, 0, "data").ok());
  auto refused = writes_->Serve(
      "team-a", protocol::CloseWriteRequest{0, opened->handle},
      [](const std::string& path) { return PermissionDeniedError("no write grant on " + path); });
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(memory_->Stat("f").status().code(), StatusCode::kNotFound);
}

TEST_F(WriteServiceTest, IdleFilesAreAbortedAndTheirSpoolFilesRemoved) {
  auto idle = Open("/lake/idle");
  auto busy = Open("/lake/busy");
  ASSERT_TRUE(idle.ok() && busy.ok());
  ASSERT_TRUE(Write(idle->handle, 0, "x").ok());
  clock_.Advance(std::chrono::seconds(40));
  ASSERT_TRUE(Write(busy->handle, 0, "y").ok());
  clock_.Advance(std::chrono::seconds(30));
  EXPECT_EQ(writes_->AbortIdle(), 1u);
  EXPECT_EQ(Write(idle->handle, 1, "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(SpoolFiles(), 1u);
  EXPECT_TRUE(Close(busy->handle).ok());
  EXPECT_EQ(memory_->Stat("idle").status().code(), StatusCode::kNotFound);
}

// A file held open without writes (a log appended to now and then) keeps its handle while its
// client sends KeepWrite; the open's reply names the timeout the client must beat.
TEST_F(WriteServiceTest, AKeptFileIsNotIdle) {
  auto log = Open("/lake/train.log");
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->idle_timeout_ms, 60'000u);
  ASSERT_TRUE(Write(log->handle, 0, "epoch 1\n").ok());
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(std::chrono::seconds(40));
    ASSERT_TRUE(writes_->Serve("team-a", protocol::KeepWriteRequest{0, log->handle}).ok());
    EXPECT_EQ(writes_->AbortIdle(), 0u);
  }
  // Only its opener keeps it, and a gone handle is NotFound.
  EXPECT_EQ(writes_->Serve("team-b", protocol::KeepWriteRequest{0, log->handle}).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(
      writes_->Serve("team-a", protocol::KeepWriteRequest{0, log->handle + 1}).status().code(),
      StatusCode::kNotFound);
  ASSERT_TRUE(Write(log->handle, 8, "epoch 2\n").ok());
  ASSERT_TRUE(Close(log->handle).ok());
  EXPECT_EQ(Content("train.log"), "epoch 1\nepoch 2\n");
}

TEST_F(WriteServiceTest, OpenFilesPerPrincipalAreCapped) {
  Start(/*per_principal=*/2);
  auto a = Open("/lake/a");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(Open("/lake/b").ok());
  const Status capped = Open("/lake/c").status();
  EXPECT_EQ(capped.code(), StatusCode::kResourceExhausted);
  // Not the budget: waiting for uploads does not lift it (EMFILE, not ENOSPC).
  EXPECT_EQ(capped.reason(), StatusReason::kTooManyOpenFiles);
  EXPECT_TRUE(Open("/lake/c", true, false, true, "team-b").ok());
  ASSERT_TRUE(Close(a->handle).ok());
  EXPECT_TRUE(Open("/lake/c").ok());
}

TEST_F(WriteServiceTest, SpoolFilesLeftByADeadProcessAreRemovedAtStart) {
  std::ofstream(spool() + "/write-abc123") << "an unfinished write";
  std::ofstream(spool() + "/keep-me") << "not ours";
  Start();
  EXPECT_FALSE(std::filesystem::exists(spool() + "/write-abc123"));
  EXPECT_TRUE(std::filesystem::exists(spool() + "/keep-me"));
  // Spool files hold every principal's data: the folder is the worker's alone.
  EXPECT_EQ(std::filesystem::status(spool()).permissions(), std::filesystem::perms::owner_all);
}

TEST_F(WriteServiceTest, TruncateShrinksAndGrowsTheFile) {
  auto opened = Open("/lake/t");
  ASSERT_TRUE(opened.ok());
  const std::string content = testing::RandomBytes(3 * kPart, 3);
  ASSERT_TRUE(Write(opened->handle, 0, content).ok());
  auto shrunk = writes_->Serve("team-a", protocol::TruncateWriteRequest{0, opened->handle, 100});
  ASSERT_TRUE(shrunk.ok());
  EXPECT_EQ(shrunk->size, 100u);
  ASSERT_TRUE(
      writes_->Serve("team-a", protocol::TruncateWriteRequest{0, opened->handle, 110}).ok());
  ASSERT_TRUE(Close(opened->handle).ok());
  EXPECT_EQ(Content("t"), content.substr(0, 100) + std::string(10, '\0'));
}

TEST_F(WriteServiceTest, RemoveDeletesAFileOfAWritableMount) {
  ASSERT_TRUE(memory_->Write("gone", std::span<const char>("x", 1)).ok());
  protocol::RemovePathRequest r;
  r.path = "/lake/gone";
  EXPECT_TRUE(writes_->Serve("team-a", r).ok());
  EXPECT_EQ(memory_->Stat("gone").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(writes_->Serve("team-a", r).status().code(), StatusCode::kNotFound);
  r.path = "/frozen/x";
  EXPECT_EQ(writes_->Serve("team-a", r).status().code(), StatusCode::kFailedPrecondition);
  r.path = "/lake";
  EXPECT_EQ(writes_->Serve("team-a", r).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(WriteServiceTest, RenameMovesAFileAndRepliesWithTheObjectUnderItsNewName) {
  const std::string content = testing::RandomBytes(3 * kPart + 7, 9);
  ASSERT_TRUE(
      memory_->Write("ckpt.tmp", std::span<const char>(content.data(), content.size())).ok());
  ASSERT_TRUE(memory_->Write("ckpt", std::span<const char>("old", 3)).ok());
  auto moved = Rename("/lake/ckpt.tmp", "/lake/ckpt");
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(Content("ckpt"), content);
  EXPECT_EQ(memory_->Stat("ckpt.tmp").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(moved->size, content.size());
  EXPECT_EQ(moved->version, memory_->Stat("ckpt")->version);
  EXPECT_EQ(Counter("cairn_worker_write_renames_total"), 1);
  // The source is gone now: NotFound, and nothing under the destination changes.
  EXPECT_EQ(Rename("/lake/ckpt.tmp", "/lake/ckpt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Content("ckpt"), content);
}

TEST_F(WriteServiceTest, RenameWithNoReplaceKeepsAnExistingDestination) {
  ASSERT_TRUE(memory_->Write("a", std::span<const char>("aa", 2)).ok());
  ASSERT_TRUE(memory_->Write("b", std::span<const char>("bbb", 3)).ok());
  EXPECT_EQ(Rename("/lake/a", "/lake/b", /*no_replace=*/true).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(Content("a"), "aa");
  EXPECT_EQ(Content("b"), "bbb");
  EXPECT_TRUE(Rename("/lake/a", "/lake/c", /*no_replace=*/true).ok());
  EXPECT_EQ(Content("c"), "aa");
}

TEST_F(WriteServiceTest, RenameStaysInOneWritableMount) {
  ASSERT_TRUE(memory_->Write("a", std::span<const char>("aa", 2)).ok());
  EXPECT_EQ(Rename("/lake/a", "/scratch/a").status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(Rename("/lake/a", "/frozen/a").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Rename("/lake/a", "/lake").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Rename("/lake/a", "/lake/a").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Rename("/lake/a", "/lake/../a").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Content("a"), "aa");
  EXPECT_EQ(scratch_->Stat("a").status().code(), StatusCode::kNotFound);
}

TEST_F(WriteServiceTest, RenameOfAnOpenFilesNameDoesNotLoseItsCommit) {
  // A writer of `b` commits after `b` was renamed away: its file appears under `b` again, whole;
  // what was renamed stays under `c`.
  auto writer = Open("/lake/b");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(Write(writer->handle, 0, "new").ok());
  ASSERT_TRUE(memory_->Write("b", std::span<const char>("old", 3)).ok());
  ASSERT_TRUE(Rename("/lake/b", "/lake/c").ok());
  auto closed = Close(writer->handle);
  // The writer opened with truncate and no version to keep: last close wins.
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(Content("b"), "new");
  EXPECT_EQ(Content("c"), "old");
  // A writer that opened the content now renamed away finds its name changed: its commit fails
  // rather than recreating the name over nothing it read.
  auto editor = Open("/lake/c", /*create=*/false, false, /*truncate=*/false);
  ASSERT_TRUE(editor.ok());
  ASSERT_TRUE(Write(editor->handle, 3, "+edit").ok());
  ASSERT_TRUE(Rename("/lake/c", "/lake/d").ok());
  EXPECT_EQ(Close(editor->handle).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(memory_->Stat("c").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Content("d"), "old");
}

TEST_F(WriteServiceTest, DirectoriesAreMadeAndRemovedOnlyWhenEmpty) {
  ASSERT_TRUE(MakeDir("/lake/runs").ok());
  ufs::ListOptions lo;
  lo.prefix = "runs/";
  auto listed = memory_->List(lo);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->directory_exists);
  EXPECT_EQ(MakeDir("/lake/runs").status().code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(memory_->Write("runs/1", std::span<const char>("x", 1)).ok());
  EXPECT_EQ(RemoveDir("/lake/runs").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(RemoveDir("/lake/runs/1").status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(memory_->Delete("runs/1").ok());
  EXPECT_TRUE(RemoveDir("/lake/runs").ok());
  EXPECT_EQ(RemoveDir("/lake/runs").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Counter("cairn_worker_write_directory_changes_total"), 2);
  EXPECT_EQ(MakeDir("/frozen/runs").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(MakeDir("/lake").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeDir("/lake/a//b").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(WriteServiceTest, AbortLeavesNothingAndClosingTheServiceAbortsTheRest) {
  auto a = Open("/lake/a");
  auto b = Open("/lake/b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(Write(a->handle, 0, testing::RandomBytes(3 * kPart, 4)).ok());
  ASSERT_TRUE(Write(b->handle, 0, testing::RandomBytes(3 * kPart, 5)).ok());
  EXPECT_TRUE(writes_->Serve("team-a", protocol::AbortWriteRequest{0, a->handle}).ok());
  EXPECT_EQ(SpoolFiles(), 1u);
  writes_.reset();
  EXPECT_EQ(SpoolFiles(), 0u);
  EXPECT_EQ(memory_->Stat("a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(memory_->Stat("b").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cairn::worker
