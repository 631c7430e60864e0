// End-to-end tests of the client's write calls against a real worker (in process and over TCP)
// with in-memory under-storage: Client::OpenForWrite, FileWriter, Client::Remove.
#include <gtest/gtest.h>

#include "client/client_impl.h"
#include "testing/test_util.h"
#include "ufs/counting_ufs.h"
#include "ufs/memory_ufs.h"
#include "worker/source_caches.h"
#include "worker/worker.h"

namespace cairn::client {
namespace {

constexpr uint32_t kPage = 256 * 1024;

class ClientWriteTest : public ::testing::TestWithParam<bool> {
 protected:
  bool tcp() const { return GetParam(); }

  void SetUp() override {
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    frozen_ = std::make_shared<ufs::MemoryUnderStorage>("mem://frozen");
    worker_source_ = std::make_shared<ufs::CountingUnderStorage>(memory_);
    lake_.path = "/lake";
    lake_.uri = "mem://lake";
    lake_.read_only = false;
    lake_.metadata_ttl = std::chrono::seconds(60);  // Writes must not be hidden by it.
    frozen_spec_.path = "/frozen";
    frozen_spec_.uri = "mem://frozen";
    worker::WorkerOptions o;
    o.mounts = {lake_, frozen_spec_};
    o.ufs_override = {worker_source_, frozen_};
    o.page_size = kPage;
    o.serve_tcp = tcp();
    o.config.listen = "127.0.0.1:0";
    o.config.metrics_listen = "";
    o.config.cache_dirs.push_back({dir_.str(), 256ull << 20});
    auto w = worker::Worker::Start(o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    worker_ = std::move(w).value();

    ClientOptions co;
    co.page_size = kPage;
    co.mounts = {lake_, frozen_spec_};
    co.worker_timeout = std::chrono::milliseconds(5000);
    if (tcp()) {
      co.workers = {"127.0.0.1:" + std::to_string(worker_->port())};
    } else {
      co.local_channel = worker_->local_channel();
    }
    client_source_ = std::make_shared<ufs::CountingUnderStorage>(memory_);
    auto mounts = mount::MountTable::CreateWith({lake_, frozen_spec_}, {client_source_, frozen_});
    ASSERT_TRUE(mounts.ok());
    auto fetcher = MakePageFetcher(co);
    ASSERT_TRUE(fetcher.ok());
    client_ = std::make_unique<ClientImpl>(co, *mounts, std::move(fetcher).value(), Clock::Real());
  }
  void TearDown() override {
    client_.reset();
    worker_.reset();
  }

  std::string ReadAll(const std::string& path) {
    auto reader = client_->Open(path);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return "";
    std::string out((*reader)->info().size, '\0');
    auto n = (*reader)->Read(0, out);
    EXPECT_TRUE(n.ok() && *n == out.size());
    return out;
  }

  testing::TempDir dir_{"client-write"};
  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<ufs::MemoryUnderStorage> frozen_;
  std::shared_ptr<ufs::CountingUnderStorage> worker_source_;  // memory_ as the worker sees it.
  std::shared_ptr<ufs::CountingUnderStorage> client_source_;  // memory_ as the client sees it.
  MountSpec lake_;
  MountSpec frozen_spec_;
  std::unique_ptr<worker::Worker> worker_;
  std::unique_ptr<ClientImpl> client_;
};

TEST_P(ClientWriteTest, AWrittenFileReadsBackByteForByteThroughTheCache) {
  // Past one 8 MiB part: the worker uploads parts while the client still writes.
  const std::string content = testing::RandomBytes(20 * 1024 * 1024 + 4321, 1);
  // A stat before the write: the client's cached "not found" must not hide the new file.
  EXPECT_EQ(client_->Stat("/lake/ckpt/model.pt").status().code(), StatusCode::kNotFound);
  auto writer = client_->Create("/lake/ckpt/model.pt");
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (size_t done = 0; done < content.size();) {
    const size_t n = std::min<size_t>(3 * 1024 * 1024 + 17, content.size() - done);
    ASSERT_TRUE((*writer)->Write(done, std::string_view(content).substr(done, n)).ok());
    done += n;
  }
  EXPECT_EQ((*writer)->size(), content.size());
  EXPECT_EQ(memory_->Stat("ckpt/model.pt").status().code(), StatusCode::kNotFound);
  auto closed = (*writer)->Close();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(closed->size, content.size());
  EXPECT_EQ(closed->version, memory_->Stat("ckpt/model.pt")->version);

  auto info = client_->Stat("/lake/ckpt/model.pt");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->version, closed->version);
  EXPECT_EQ(ReadAll("/lake/ckpt/model.pt"), content);
  auto listing = client_->ListDir("/lake/ckpt", "", 100);
  ASSERT_TRUE(listing.ok());
  ASSERT_EQ(listing->entries.size(), 1u);
  EXPECT_EQ(listing->entries[0].name, "model.pt");
  EXPECT_FALSE((*writer)->Write(0, std::string_view("late")).ok());
}

TEST_P(ClientWriteTest, OverlappingWritesInFlightLandInTheOrderTheyWereMade) {
  auto writer = client_->Create("/lake/patched");
  ASSERT_TRUE(writer.ok());
  const std::string a(3 << 20, 'a');
  const std::string b(2 << 20, 'b');
  const std::string c(4096, 'c');
  ASSERT_TRUE((*writer)->Write(0, a).ok());
  ASSERT_TRUE((*writer)->Write(1 << 20, b).ok());  // Over a's middle while a is in flight.
  ASSERT_TRUE((*writer)->Write(0, c).ok());        // A header patched last.
  ASSERT_TRUE((*writer)->Close().ok());
  std::string expected = a;
  expected.replace(1 << 20, b.size(), b);
  expected.replace(0, c.size(), c);
  EXPECT_EQ(ReadAll("/lake/patched"), expected);
}

TEST_P(ClientWriteTest, SyncTruncateAndCloseAreEachDurable) {
  auto writer = client_->Create("/lake/log.txt");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Write(0, std::string_view("step 1 loss 2.3\n")).ok());
  auto synced = (*writer)->Sync();
  ASSERT_TRUE(synced.ok()) << synced.status().ToString();
  EXPECT_EQ(ReadAll("/lake/log.txt"), "step 1 loss 2.3\n");
  ASSERT_TRUE((*writer)->Write(16, std::string_view("step 2 loss 1.9\n")).ok());
  ASSERT_TRUE((*writer)->Truncate(20).ok());
  EXPECT_EQ((*writer)->size(), 20u);
  auto closed = (*writer)->Close();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(ReadAll("/lake/log.txt"), "step 1 loss 2.3\nstep");
}

// What `git index-pack` and zip writers do: read back what they are still writing, before any
// of it is in the source, in pieces larger than one request, with the holes as zeros; after a
// sync the file reads the same, and a closed writer says it is closed.
TEST_P(ClientWriteTest, AFileOpenForWritingReadsBackWhatWasWritten) {
  auto writer = client_->Create("/lake/pack.tmp");
  ASSERT_TRUE(writer.ok());
  const std::string head = testing::RandomBytes((3 << 20) + 11, 5);
  const std::string tail = testing::RandomBytes(4000, 6);
  ASSERT_TRUE((*writer)->Write(0, head).ok());
  ASSERT_TRUE((*writer)->Write((4 << 20) + 1, tail).ok());  // A hole before it.
  std::string expected = head + std::string((4 << 20) + 1 - head.size(), '\0') + tail;
  EXPECT_EQ(memory_->Stat("pack.tmp").status().code(), StatusCode::kNotFound);

  std::string got(expected.size() + 100, '?');
  auto n = (*writer)->ReadAt(0, got);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, expected.size());
  EXPECT_TRUE(got.substr(0, *n) == expected);
  std::string piece(10, '?');
  n = (*writer)->ReadAt(head.size() - 5, piece);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(piece, head.substr(head.size() - 5) + std::string(5, '\0'));
  n = (*writer)->ReadAt(expected.size(), piece);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);  // At the end.

  ASSERT_TRUE((*writer)->Sync().ok());
  ASSERT_TRUE((*writer)->Truncate(100).ok());
  n = (*writer)->ReadAt(0, got);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(got.substr(0, *n), head.substr(0, 100));
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ((*writer)->ReadAt(0, got).status().code(), StatusCode::kFailedPrecondition);
}

TEST_P(ClientWriteTest, AWriterDroppedWithoutCloseLeavesNothing) {
  {
    auto writer = client_->Create("/lake/abandoned");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Write(0, testing::RandomBytes(1 << 20, 2)).ok());
  }
  EXPECT_EQ(memory_->Stat("abandoned").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(worker_->writes()->open_files(), 0u);
}

TEST_P(ClientWriteTest, RefusalsAreTheRightErrors) {
  EXPECT_EQ(client_->Create("/frozen/x").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(client_->Create("/lake").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Create("/").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Create("/nowhere/x").status().code(), StatusCode::kNotFound);
  memory_->Put("exists", "x");
  WriteOptions exclusive;
  exclusive.exclusive = true;
  EXPECT_EQ(client_->OpenForWrite("/lake/exists", exclusive).status().code(),
            StatusCode::kAlreadyExists);
  WriteOptions no_create;
  no_create.create = false;
  EXPECT_EQ(client_->OpenForWrite("/lake/missing", no_create).status().code(),
            StatusCode::kNotFound);
  auto appended = client_->OpenForWrite("/lake/exists", WriteOptions{false, false, false});
  ASSERT_TRUE(appended.ok()) << appended.status().ToString();
  EXPECT_EQ((*appended)->size(), 1u);
  ASSERT_TRUE((*appended)->Write(1, std::string_view("yz")).ok());
  ASSERT_TRUE((*appended)->Close().ok());
  EXPECT_EQ(ReadAll("/lake/exists"), "xyz");
}

TEST_P(ClientWriteTest, RemoveDeletesTheFileForThisClientAtOnce) {
  memory_->Put("old.pt", "old");
  EXPECT_EQ(ReadAll("/lake/old.pt"), "old");  // Its metadata is now cached.
  EXPECT_TRUE(client_->Remove("/lake/old.pt").ok());
  EXPECT_EQ(memory_->Stat("old.pt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->Stat("/lake/old.pt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->Remove("/lake/old.pt").code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->Remove("/frozen/x").code(), StatusCode::kFailedPrecondition);
}

// The kernel looks a name up before it creates it: the worker takes that lookup's "no such
// file" instead of asking the source again, and asks when no fresh lookup preceded the create.
TEST_P(ClientWriteTest, ACreateRightAfterALookupThatFoundNothingSparesTheWorkersStat) {
  WriteOptions create;
  create.truncate = true;
  ASSERT_EQ(client_->Stat("/lake/ckpt/shard-0.pt").status().code(), StatusCode::kNotFound);
  worker_source_->Reset();
  auto writer = client_->OpenForWrite("/lake/ckpt/shard-0.pt", create);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_EQ(worker_source_->counts().stats, 0u);
  ASSERT_TRUE((*writer)->Write(0, std::string_view("shard")).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ(ReadAll("/lake/ckpt/shard-0.pt"), "shard");

  worker_source_->Reset();
  writer = client_->OpenForWrite("/lake/ckpt/shard-1.pt", create);  // No lookup first.
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_EQ(worker_source_->counts().stats, 1u);
  ASSERT_TRUE((*writer)->Close().ok());

  // The lookup was right when made, but the object appeared before the create: the commit
  // fails rather than replace an object the writer never saw. (A folder whose listing this
  // client has not cached: in ckpt/ the lookup is answered from the cached listing, which is
  // not a fresh look at the source, and the worker asks itself.)
  ASSERT_EQ(client_->Stat("/lake/other/shard-2.pt").status().code(), StatusCode::kNotFound);
  memory_->Put("other/shard-2.pt", "theirs");
  writer = client_->OpenForWrite("/lake/other/shard-2.pt", create);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->Write(0, std::string_view("mine")).ok());
  EXPECT_EQ((*writer)->Close().status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(testing::ObjectContent(*memory_, "other/shard-2.pt"), "theirs");
}

// New files created one after another in one folder, with no lookup of their own (the worker's
// open is the first to ask): the worker looks at the source once for the folder (a HEAD of the
// first name and one LIST), then knows the other names absent from that listing (and not
// directories). The commits
// stay conditional: an object that appears behind the worker's back fails its create.
TEST_P(ClientWriteTest, TheWorkerListsAFolderOnceForTheNewFilesCreatedInIt) {
  WriteOptions create;
  create.truncate = true;
  metrics::Counter* answers =
      worker_->registry()->AddCounter(worker::kAbsentAnswersMetric, worker::kAbsentAnswersHelp);
  const uint64_t answers_before = answers->value();
  worker_source_->Reset();
  for (int i = 0; i < 20; ++i) {
    const std::string path = "/lake/shards/shard-" + std::to_string(100 + i);
    auto writer = client_->OpenForWrite(path, create);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE((*writer)->Write(0, std::string_view(path)).ok());
    ASSERT_TRUE((*writer)->Close().ok()) << path;
  }
  EXPECT_EQ(worker_source_->counts().stats, 1u);
  EXPECT_EQ(worker_source_->counts().lists, 1u);
  EXPECT_EQ(worker_source_->counts().writes, 20u);
  // The 19 later names' stats, and every create's check that its name is no directory (a LIST
  // of "name/"), answered from that listing.
  EXPECT_EQ(answers->value() - answers_before, 19u + 20u);
  for (int i = 0; i < 20; ++i) {
    const std::string path = "/lake/shards/shard-" + std::to_string(100 + i);
    EXPECT_EQ(ReadAll(path), path);
  }
  // Created behind the worker's back after its listing: the create fails at its commit and the
  // object stays as it was (never replaced on the strength of the cached listing).
  memory_->Put("shards/theirs", "theirs");
  auto writer = client_->OpenForWrite("/lake/shards/theirs", create);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->Write(0, std::string_view("mine")).ok());
  EXPECT_EQ((*writer)->Close().status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(testing::ObjectContent(*memory_, "shards/theirs"), "theirs");
}

// Files written one after another into one folder, each looked up first (as the kernel does
// before a create): the folder is listed once, not again after each commit; the client's own
// listing and stats show every file as committed.
TEST_P(ClientWriteTest, WritingManyFilesIntoAFolderListsItOnce) {
  WriteOptions create;
  create.truncate = true;
  client_source_->Reset();
  std::vector<std::string> contents;
  for (int i = 0; i < 20; ++i) {
    const std::string path = "/lake/out/part-" + std::to_string(100 + i);
    ASSERT_EQ(client_->Stat(path).status().code(), StatusCode::kNotFound) << path;
    contents.push_back(testing::RandomBytes(1000 + i, i));
    auto writer = client_->OpenForWrite(path, create);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE((*writer)->Write(0, std::string_view(contents.back())).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  EXPECT_EQ(client_source_->counts().lists, 1u);
  // ListDir stats the folder first: one LIST of its parent. Its own listing is the cached one.
  auto page = client_->ListDir("/lake/out", "", 1000);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->entries.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    const std::string path = "/lake/out/part-" + std::to_string(100 + i);
    EXPECT_EQ(page->entries[i].size, contents[i].size());
    EXPECT_EQ(ReadAll(path), contents[i]) << path;
  }
  // A removed file leaves the listing at once, for this client.
  ASSERT_TRUE(client_->Remove("/lake/out/part-100").ok());
  EXPECT_EQ(client_->Stat("/lake/out/part-100").status().code(), StatusCode::kNotFound);
  page = client_->ListDir("/lake/out", "", 1000);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->entries.size(), 19u);
  EXPECT_EQ(client_source_->counts().lists, 2u);
  EXPECT_EQ(client_source_->counts().stats, 0u);
}

// FUSE's release closes a file after close(2) returned (its flush synced it), and after what
// the program did next: git syncs config.lock, renames it to config, and creates config.lock
// again. A close that changes nothing must not bring back the metadata of the old name.
TEST_P(ClientWriteTest, ACloseAfterSyncAndRenameDoesNotBringTheOldNameBack) {
  WriteOptions exclusive;
  exclusive.exclusive = true;
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(client_->Stat("/lake/git/config.lock").status().code(), StatusCode::kNotFound);
    auto writer = client_->OpenForWrite("/lake/git/config.lock", exclusive);
    ASSERT_TRUE(writer.ok()) << round << ": " << writer.status().ToString();
    ASSERT_TRUE((*writer)->Write(0, std::string_view("[core]")).ok());
    ASSERT_TRUE((*writer)->Sync().ok());  // close(2): FUSE's flush.
    ASSERT_TRUE(client_->Rename("/lake/git/config.lock", "/lake/git/config", false).ok());
    ASSERT_TRUE((*writer)->Close().ok());  // FUSE's release, later.
    EXPECT_EQ(client_->Stat("/lake/git/config.lock").status().code(), StatusCode::kNotFound);
    auto page = client_->ListDir("/lake/git", "", 1000);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_EQ(page->entries.size(), 1u);
    EXPECT_EQ(page->entries[0].name, "config");
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ClientWriteTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("tcp") : std::string("in_process");
                         });

}  // namespace
}  // namespace cairn::client
