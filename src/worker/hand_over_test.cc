// HandOver (protocol v12): a rename of a write-back file not yet uploaded whose new name another
// worker owns. The fixture's worker ("a", the owner of the old name) writes the file to the
// owner of the new name ("b", a second WriteService over the same source, reached through a
// LocalChannel) and drops its own; the file then waits at "b" as if written under the new name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <utility>
#include <variant>

#include "worker/local_channel.h"
#include "worker/write_back_fixture.h"

namespace cairn::worker {
namespace {

// The channel to "b", running `before_first_write` (once) before it forwards the first WritePage.
class InterceptingChannel : public protocol::PageChannel {
 public:
  InterceptingChannel(std::shared_ptr<protocol::PageChannel> inner,
                      std::function<void()> before_first_write)
      : inner_(std::move(inner)), before_first_write_(std::move(before_first_write)) {}
  void Call(const protocol::Request& request, std::span<char> dest, Callback done) override {
    inner_->Call(request, dest, std::move(done));
  }
  void CallWrite(const protocol::WriteRequest& request, WriteCallback done) override {
    if (std::holds_alternative<protocol::WritePageRequest>(request) && before_first_write_) {
      std::exchange(before_first_write_, nullptr)();
    }
    inner_->CallWrite(request, std::move(done));
  }
  std::string Describe() const override { return "b (intercepted)"; }

 private:
  std::shared_ptr<protocol::PageChannel> inner_;
  std::function<void()> before_first_write_;
};

class HandOverTest : public WriteBackTest {
 protected:
  void SetUp() override {
    WriteBackTest::SetUp();
    pagestore::PageStoreOptions so;
    so.dirs.push_back({(dir_.path() / "b-cache").string(), 64ull << 20});
    so.page_size = kPage;
    b_store_ = std::move(pagestore::PageStore::Create(so)).value();
    PageServiceOptions po;
    po.page_size = kPage;
    b_pages_ = std::make_unique<PageService>(mounts_, b_store_.get(), &b_pages_registry_, po);
    WriteServiceOptions wo;
    wo.spool_dirs = {(dir_.path() / "b-spool").string()};
    wo.part_size = kPart;
    wo.registry = &b_registry_;
    wo.write_back.journal_path = (dir_.path() / "b-journal").string();
    wo.write_back.commit_delay = std::chrono::minutes(10);  // Uploads only when synced.
    auto created = WriteService::Create(b_pages_.get(), wo);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    b_writes_ = std::move(*created);
    to_b_ = std::make_shared<LocalChannel>(b_pages_.get(), b_writes_.get());
    // "b" owns the names ending in ".pt"; "a" every other one.
    owner_of_ =
        [this](const std::string& path) -> StatusOr<std::shared_ptr<protocol::PageChannel>> {
      if (b_down_) return UnavailableError("b is down");
      if (path.ends_with(".pt") && intercepted_ != nullptr) return intercepted_;
      if (path.ends_with(".pt")) return std::shared_ptr<protocol::PageChannel>(to_b_);
      return std::shared_ptr<protocol::PageChannel>();
    };
    Start(1ull << 30, std::chrono::minutes(10));
  }
  void TearDown() override {
    writes_.reset();
    intercepted_.reset();
    to_b_.reset();
    b_writes_.reset();
  }

  StatusOr<protocol::WriteReply> HandOver(const std::string& from, const std::string& to,
                                          bool no_replace = false) {
    protocol::HandOverRequest r;
    r.from = from;
    r.to = to;
    r.no_replace = no_replace;
    return writes_->Serve("team-a", r);
  }
  // The content of "b"'s newest pending file of `path`; nullopt if none.
  std::optional<std::string> PendingAtB(const std::string& path) {
    std::optional<WriteBack::Latest> latest = b_writes_->write_back()->LatestFor(path);
    if (!latest) return std::nullopt;
    std::string bytes(latest->size, '\0');
    const ssize_t n = ::pread(latest->fd, bytes.data(), bytes.size(), 0);
    ::close(latest->fd);
    if (n != static_cast<ssize_t>(bytes.size())) return "(short read)";
    return bytes;
  }

  metrics::Registry b_pages_registry_;
  metrics::Registry b_registry_;
  std::unique_ptr<pagestore::PageStore> b_store_;
  std::unique_ptr<PageService> b_pages_;
  std::unique_ptr<WriteService> b_writes_;
  std::shared_ptr<LocalChannel> to_b_;
  std::shared_ptr<protocol::PageChannel> intercepted_;  // Used instead of to_b_ when set.
  bool b_down_ = false;
};

// The checkpoint idiom across two owners while the lake is down: nothing waits for an upload,
// the source is not asked, and what reaches the lake later is the new name only.
TEST_F(HandOverTest, APendingFileMovesToTheOwnerOfItsNewNameWithoutTheSource) {
  const std::string data = testing::RandomBytes(20 * kPart + 12345, 41);  // Several parts.
  ASSERT_TRUE(WriteFile("/lake/ckpt.tmp", data).ok());
  SourceUnreachable(true);
  const uint64_t source_calls = faults_->calls(ufs::UfsOp::kDelete);
  StatusOr<protocol::WriteReply> moved = HandOver("/lake/ckpt.tmp", "/lake/ckpt.pt");
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->size, data.size());
  EXPECT_EQ(faults_->calls(ufs::UfsOp::kDelete), source_calls);
  EXPECT_FALSE(Pending("/lake/ckpt.tmp"));
  EXPECT_EQ(PendingAtB("/lake/ckpt.pt"), data);
  EXPECT_EQ(Metric("cairn_worker_write_back_hand_overs_total"), 1);
  EXPECT_EQ(Metric("cairn_worker_write_back_removed_total"), 1);

  SourceUnreachable(false);
  ASSERT_TRUE(SyncAll().ok());
  ASSERT_TRUE(b_writes_->SyncPath("/", std::chrono::seconds(20)).ok());
  EXPECT_EQ(Content("ckpt.pt"), data);
  EXPECT_FALSE(InSource("ckpt.tmp"));
}

// Past 1,000 parts the digest's parts double in size: the copy hashes them as the digest does
// (it cut fixed blocks before, so every file of more than 1,000 parts failed the check and
// waited for its upload instead).
TEST_F(HandOverTest, AFileOfMoreThanAThousandPartsIsPassedOn) {
  const std::string data = testing::RandomBytes(1000 * kPart + 5 * kPart + 17, 53);
  ASSERT_TRUE(WriteFile("/lake/big.tmp", data).ok());
  StatusOr<protocol::WriteReply> moved = HandOver("/lake/big.tmp", "/lake/big.pt");
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(Metric("cairn_worker_write_back_damaged_spools_total"), 0);
  EXPECT_TRUE(PendingAtB("/lake/big.pt") == data);
}

// The copy does not hold the old name's commit lock: a close of the old name while it is
// copied completes, comes after the rename, and stays (only what was passed on is dropped).
TEST_F(HandOverTest, ACloseOfTheOldNameDuringTheCopyStays) {
  const std::string data = testing::RandomBytes(5 * kPart, 47);
  ASSERT_TRUE(WriteFile("/lake/busy.tmp", data).ok());
  Status newer_close = InternalError("not run");
  intercepted_ = std::make_shared<InterceptingChannel>(
      to_b_, [&] { newer_close = WriteFile("/lake/busy.tmp", "written again").status(); });
  ASSERT_TRUE(HandOver("/lake/busy.tmp", "/lake/busy.pt").ok());
  EXPECT_TRUE(newer_close.ok()) << newer_close.ToString();
  EXPECT_EQ(PendingAtB("/lake/busy.pt"), data);
  ASSERT_TRUE(Pending("/lake/busy.tmp"));
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("busy.tmp"), "written again");
}

// A remove of the old name while the file is copied comes first: the rename then finds no
// file (NotFound, as a rename after a remove does), and nothing appears under the new name.
TEST_F(HandOverTest, ARemoveDuringTheCopyWins) {
  ASSERT_TRUE(WriteFile("/lake/gone.tmp", testing::RandomBytes(3 * kPart, 53)).ok());
  Status removed = InternalError("not run");
  intercepted_ =
      std::make_shared<InterceptingChannel>(to_b_, [&] { removed = Remove("/lake/gone.tmp"); });
  EXPECT_EQ(HandOver("/lake/gone.tmp", "/lake/gone.pt").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(removed.ok()) << removed.ToString();
  EXPECT_EQ(PendingAtB("/lake/gone.pt"), std::nullopt);
  EXPECT_EQ(b_writes_->open_files(), 0u) << "the new owner's open file was aborted";
  EXPECT_FALSE(Pending("/lake/gone.tmp"));
  EXPECT_EQ(Metric("cairn_worker_write_back_hand_overs_total"), 0);
}

// Worker "a" owning both names renames as before (decision 8); a name with nothing pending is
// NotFound (the client renames in the source).
TEST_F(HandOverTest, OneOwnerRenamesItselfAndNothingPendingIsNotFound) {
  ASSERT_TRUE(WriteFile("/lake/a.tmp", "local").ok());
  ASSERT_TRUE(HandOver("/lake/a.tmp", "/lake/a.bin").ok());
  EXPECT_TRUE(Pending("/lake/a.bin"));
  EXPECT_FALSE(Pending("/lake/a.tmp"));
  EXPECT_EQ(HandOver("/lake/nothing.tmp", "/lake/x.pt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Metric("cairn_worker_write_back_hand_overs_total"), 0);
}

// A refusal by the new owner (the name exists, for a no-replace rename) is the rename's answer,
// and the file stays where it was, still pending.
TEST_F(HandOverTest, ARefusedHandOverLeavesTheFileInPlace) {
  memory_->Put("taken.pt", "someone else's");
  ASSERT_TRUE(WriteFile("/lake/taken.tmp", "mine").ok());
  EXPECT_EQ(HandOver("/lake/taken.tmp", "/lake/taken.pt", /*no_replace=*/true).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_TRUE(Pending("/lake/taken.tmp"));
  EXPECT_EQ(PendingAtB("/lake/taken.pt"), std::nullopt);
  EXPECT_EQ(b_writes_->open_files(), 0u) << "the new owner's open file was aborted";
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("taken.tmp"), "mine");
  EXPECT_EQ(Content("taken.pt"), "someone else's");
}

// When the new owner cannot be reached, the old owner uploads the file and answers NotFound:
// the client's rename then happens in the source, as before hand-overs.
TEST_F(HandOverTest, AnUnreachableOwnerMeansUploadFirst) {
  ASSERT_TRUE(WriteFile("/lake/far.tmp", "far").ok());
  b_down_ = true;
  EXPECT_EQ(HandOver("/lake/far.tmp", "/lake/far.pt").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(Pending("/lake/far.tmp"));
  EXPECT_EQ(Content("far.tmp"), "far");
}

// A hand-over refused by the new owner (a no-replace rename onto a taken name) changes nothing:
// the old name's object, which only a hand-over that happens deletes, is still there, and the
// file replaces it as it was closed to (no conflict).
TEST_F(HandOverTest, AFileWhoseOldObjectARefusedHandOverDeletedStillGoesUp) {
  memory_->Put("taken.tmp", "an older upload of mine");
  memory_->Put("taken.pt", "someone else's");
  ASSERT_TRUE(WriteFile("/lake/taken.tmp", "mine").ok());  // Replaces the older upload.
  EXPECT_EQ(HandOver("/lake/taken.tmp", "/lake/taken.pt", /*no_replace=*/true).status().code(),
            StatusCode::kAlreadyExists);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("taken.tmp"), "mine");
  EXPECT_EQ(Content("taken.pt"), "someone else's");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

// The old name's object (an older upload) is deleted only once the file is copied: a crash
// during the copy, seconds or minutes for a checkpoint, leaves all as it was (the file, still
// expecting that object, was set aside at the restart: in neither name in the source). A
// delete the source does not answer then fails the rename and changes nothing.
TEST_F(HandOverTest, TheOldNamesObjectIsDeletedOnlyAfterTheCopy) {
  const std::string data = testing::RandomBytes(3 * kPart, 59);
  memory_->Put("ckpt.tmp", "an older upload");
  ASSERT_TRUE(WriteFile("/lake/ckpt.tmp", data).ok());
  bool there_during_copy = false;
  intercepted_ = std::make_shared<InterceptingChannel>(
      to_b_, [&] { there_during_copy = InSource("ckpt.tmp"); });
  ASSERT_TRUE(HandOver("/lake/ckpt.tmp", "/lake/ckpt.pt").ok());
  EXPECT_TRUE(there_during_copy);
  EXPECT_FALSE(InSource("ckpt.tmp"));
  EXPECT_FALSE(Pending("/lake/ckpt.tmp"));
  EXPECT_EQ(PendingAtB("/lake/ckpt.pt"), data);

  memory_->Put("log.tmp", "an older upload");
  ASSERT_TRUE(WriteFile("/lake/log.tmp", "new lines").ok());
  intercepted_ = std::make_shared<InterceptingChannel>(to_b_, [&] { SourceUnreachable(true); });
  EXPECT_FALSE(HandOver("/lake/log.tmp", "/lake/log.pt").ok());
  SourceUnreachable(false);
  EXPECT_TRUE(Pending("/lake/log.tmp"));
  EXPECT_EQ(PendingAtB("/lake/log.pt"), std::nullopt);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("log.tmp"), "new lines");  // Over the older upload, as closed to.
  EXPECT_FALSE(InSource("log.pt"));
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

// A spool file damaged on disk after its close is not passed on: the hand-over falls back to the
// upload, which sets it aside (never uploaded, never moved).
TEST_F(HandOverTest, ADamagedSpoolFileIsNotPassedOn) {
  const std::string data = testing::RandomBytes(3 * kPart, 43);
  ASSERT_TRUE(WriteFile("/lake/bad.tmp", data).ok());
  std::optional<WriteBack::Latest> latest = writes_->write_back()->LatestFor("/lake/bad.tmp");
  ASSERT_TRUE(latest.has_value());
  ::close(latest->fd);
  for (const auto& entry : std::filesystem::directory_iterator(spool())) {
    if (entry.path().filename().string().rfind("write-", 0) != 0) continue;
    ASSERT_TRUE(testing::FlipByteAt(entry.path(), kPart + 7));
  }
  EXPECT_EQ(HandOver("/lake/bad.tmp", "/lake/bad.pt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(PendingAtB("/lake/bad.pt"), std::nullopt);
  EXPECT_EQ(Metric("cairn_worker_write_back_damaged_spools_total"), 1);
  EXPECT_FALSE(InSource("bad.pt"));
  EXPECT_FALSE(InSource("bad.tmp"));
  EXPECT_EQ(Metric("cairn_worker_write_back_hand_overs_total"), 0);
}

}  // namespace
}  // namespace cairn::worker
