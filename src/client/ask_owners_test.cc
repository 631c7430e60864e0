// Where a name change goes when the owner of its path fails to answer (ClientImpl::AskOwners):
// on to the next owner only if the request never reached the first. A rename, hand-over or
// remove the first owner got and then lost (it crashed mid-way, or stalled past the deadline)
// may have been done, or may still be: asking another worker would report a half-done rename
// as "no such file". Scripted owners, no worker.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/client_impl.h"
#include "common/thread_annotations.h"
#include "ufs/memory_ufs.h"

namespace cairn::client {
namespace {

constexpr uint32_t kPage = 1 << 20;

// One worker that answers every write request with the status scripted for its type.
class ScriptedOwner {
 public:
  // Answers requests of `type` with `status`: the next `times` of them, then OK (-1: all).
  void Answer(protocol::MessageType type, Status status, int times = -1) {
    MutexLock l(&mu_);
    answers_[type] = {std::move(status), times};
  }
  void CallWrite(const protocol::WriteRequest& request, protocol::PageChannel::WriteCallback done) {
    Status answer;
    {
      MutexLock l(&mu_);
      received_.push_back(protocol::TypeOf(request));
      if (auto it = answers_.find(protocol::TypeOf(request));
          it != answers_.end() && it->second.times != 0) {
        answer = it->second.status;
        if (it->second.times > 0) --it->second.times;
      }
    }
    if (!answer.ok()) {
      done(answer);
      return;
    }
    done(protocol::WriteReply{});
  }
  std::vector<protocol::MessageType> received() const {
    MutexLock l(&mu_);
    return received_;
  }

 private:
  mutable Mutex mu_;
  struct Scripted {
    Status status;
    int times = -1;
  };
  std::map<protocol::MessageType, Scripted> answers_ GUARDED_BY(mu_);
  std::vector<protocol::MessageType> received_ GUARDED_BY(mu_);
};

// The channel the fetcher owns: forwards to the test's ScriptedOwner.
class ScriptedChannel : public protocol::PageChannel {
 public:
  ScriptedChannel(std::string id, ScriptedOwner* owner) : id_(std::move(id)), owner_(owner) {}
  void Call(const protocol::Request&, std::span<char>, Callback done) override {
    done(UnavailableError(id_ + " serves no pages in this test"));
  }
  void CallWrite(const protocol::WriteRequest& request, WriteCallback done) override {
    owner_->CallWrite(request, std::move(done));
  }
  std::string Describe() const override { return id_; }

 private:
  std::string id_;
  ScriptedOwner* owner_;
};

class AskOwnersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MountSpec spec;
    spec.path = "/wb";
    spec.uri = "mem://lake";
    spec.read_only = false;
    spec.write_back = true;
    MountSpec through = spec;
    through.path = "/wt";
    through.uri = "mem://lake2";
    through.write_back = false;
    auto mounts = mount::MountTable::CreateWith(
        {spec, through}, {std::make_shared<ufs::MemoryUnderStorage>("mem://lake"),
                          std::make_shared<ufs::MemoryUnderStorage>("mem://lake2")});
    ASSERT_TRUE(mounts.ok()) << mounts.status().ToString();
    auto fetcher = std::make_unique<PageFetcher>(
        kPage,
        [this](const placement::WorkerNode& node) {
          return std::make_unique<ScriptedChannel>(node.id, &owners_[node.id]);
        },
        2);
    owners_["w0"];
    owners_["w1"];
    std::vector<placement::WorkerNode> nodes(2);
    nodes[0].id = "w0";
    nodes[0].address = "w0:1";
    nodes[1].id = "w1";
    nodes[1].address = "w1:1";
    ASSERT_TRUE(fetcher->SetWorkers(nodes).ok());
    fetcher_ = fetcher.get();
    ClientOptions options;
    options.page_size = kPage;
    options.write_room_wait = std::chrono::seconds(30);
    client_ = std::make_unique<ClientImpl>(options, *mounts, std::move(fetcher), &clock_);
  }

  // The owner the ring names first for `path`, and the one after it.
  ScriptedOwner& First(const std::string& path) {
    return owners_.at(fetcher_->OwnersOf(path).at(0)->Describe());
  }
  ScriptedOwner& Second(const std::string& path) {
    return owners_.at(fetcher_->OwnersOf(path).at(1)->Describe());
  }

  // A name whose first owner differs from that of `other`.
  std::string NameOwnedApartFrom(const std::string& other) {
    for (int i = 0;; ++i) {
      std::string name = "/wb/ckpt/step-" + std::to_string(i) + ".pt";
      if (&First(name) != &First(other)) return name;
    }
  }

  FakeClock clock_;  // Moved only by the client's waits (for room, for an owner to answer).
  std::map<std::string, ScriptedOwner> owners_;
  PageFetcher* fetcher_ = nullptr;
  std::unique_ptr<ClientImpl> client_;
};

using protocol::MessageType;

TEST_F(AskOwnersTest, ARemoveTheOwnerGotAndLostIsNotSentToTheNextOwner) {
  const std::string path = "/wb/ckpt/old.pt";
  First(path).Answer(MessageType::kRemovePath,
                     UnavailableError("connection reset").WithOutcomeUnknown());
  Status removed = client_->Remove(path);
  EXPECT_EQ(removed.code(), StatusCode::kUnavailable) << removed.ToString();
  EXPECT_TRUE(removed.outcome_unknown());
  EXPECT_TRUE(Second(path).received().empty());

  // A stalled owner: its deadline passed with the request in its hands.
  First(path).Answer(MessageType::kRemovePath,
                     DeadlineExceededError("worker did not answer in time").WithOutcomeUnknown());
  removed = client_->Remove(path);
  EXPECT_EQ(removed.code(), StatusCode::kDeadlineExceeded) << removed.ToString();
  EXPECT_TRUE(Second(path).received().empty());

  // An owner that was never reached (connection refused): on a write-back mount the remove is
  // sent to it again, never to the next owner, which does not hold the files waiting there
  // (it would remove the source's object and leave the waiting file to be uploaded after the
  // remove said OK); after a few tries, the failure.
  First(path).Answer(MessageType::kRemovePath, UnavailableError("connection refused").WithNotSent(),
                     /*times=*/2);
  const int64_t began = clock_.NowMicros();
  EXPECT_TRUE(client_->Remove(path).ok());
  EXPECT_EQ(clock_.NowMicros() - began, 250'000 + 500'000);  // Backed off in between.
  EXPECT_TRUE(Second(path).received().empty());
  First(path).Answer(MessageType::kRemovePath,
                     UnavailableError("connection refused").WithNotSent());
  removed = client_->Remove(path);
  EXPECT_EQ(removed.code(), StatusCode::kUnavailable) << removed.ToString();
  EXPECT_TRUE(Second(path).received().empty());
  // A write-through mount has nothing waiting anywhere: the next owner removes the file.
  First(path).Answer(MessageType::kRemovePath, Status::Ok());  // Both owners answer again.
  const std::string through = "/wt" + path.substr(3);
  First(through).Answer(MessageType::kRemovePath,
                        UnavailableError("connection refused").WithNotSent());
  const size_t before = Second(through).received().size();
  EXPECT_TRUE(client_->Remove(through).ok());
  EXPECT_EQ(Second(through).received().size(), before + 1);
}

// An open that keeps the content of a write-back file (an append) goes to the path's owner
// only: the file may wait there, newer than the source's, and another worker would start from
// the source's (its commit then replacing the newer file, set aside); so does an exclusive
// create. One that truncates fails over as before: it starts from nothing.
TEST_F(AskOwnersTest, AnAppendToAWriteBackFileIsNotOpenedAtTheNextOwner) {
  const std::string path = "/wb/logs/train.log";
  WriteOptions keep;
  keep.create = true;
  keep.truncate = false;
  First(path).Answer(MessageType::kOpenWrite,
                     UnavailableError("worker w is suspect (recently unreachable)").WithNotSent());
  auto refused = client_->OpenForWrite(path, keep);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Second(path).received().empty());
  // An exclusive create too: the files waiting at the owner may hold the name.
  WriteOptions exclusive;
  exclusive.create = true;
  exclusive.truncate = true;
  exclusive.exclusive = true;
  EXPECT_EQ(client_->OpenForWrite(path, exclusive).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Second(path).received().empty());
  WriteOptions replace;
  replace.create = true;
  replace.truncate = true;
  auto opened = client_->OpenForWrite(path, replace);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  (*opened)->Abort().IgnoreError();
  ASSERT_FALSE(Second(path).received().empty());
  EXPECT_EQ(Second(path).received().front(), MessageType::kOpenWrite);
}

// The crash of test_cluster.py::test_a_crash_while_a_renamed_file_is_passed_on_loses_nothing:
// the owner of the old name dies after the new name's owner took the file. Going on to the next
// owner of the old name (which holds nothing of it) and then renaming in the source would answer
// "no such file" for a file that exists under both names.
TEST_F(AskOwnersTest, ARenameWhoseHandOverWasCutOffFailsWithAnUnknownOutcome) {
  const std::string from = "/wb/ckpt/step.pt.tmp";
  const std::string to = NameOwnedApartFrom(from);
  First(from).Answer(MessageType::kHandOver,
                     UnavailableError("connection reset").WithOutcomeUnknown());
  Status renamed = client_->Rename(from, to, /*no_replace=*/false);
  EXPECT_EQ(renamed.code(), StatusCode::kUnavailable) << renamed.ToString();
  EXPECT_TRUE(renamed.outcome_unknown());
  for (const auto& [id, owner] : owners_) {
    for (MessageType type : owner.received()) {
      EXPECT_EQ(type, MessageType::kHandOver) << id << " got another request";
    }
  }
  EXPECT_TRUE(Second(from).received().empty());

  // The same hand-over answered "nothing of it waits here": the rename goes to the owner of
  // `to`, which renames in the source.
  First(from).Answer(MessageType::kHandOver, NotFoundError("nothing of it waits here"));
  EXPECT_TRUE(client_->Rename(from, to, false).ok());
  auto got = First(to).received();
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), MessageType::kRename);
}

TEST_F(AskOwnersTest, AMkdirGoesOnToTheNextOwnerWhateverHappenedAtTheFirst) {
  // Creating a folder twice is harmless: the next owner is asked even if the first got it.
  const std::string path = "/wb/ckpt/run-7";
  First(path).Answer(MessageType::kMakeDir,
                     UnavailableError("connection reset").WithOutcomeUnknown());
  EXPECT_TRUE(client_->MakeDir(path).ok());
  EXPECT_EQ(Second(path).received(), std::vector<MessageType>{MessageType::kMakeDir});
}

// An open refused for room (the owner's write-back budget is full of files still uploading) is
// sent again to the same owner while uploads make room, as a refused write is; it fails with
// the refusal once write_room_wait has passed (ENOSPC through FUSE).
TEST_F(AskOwnersTest, AnOpenRefusedForRoomIsSentAgainUntilTheRoomWaitPasses) {
  const std::string path = "/wb/logs/train.log";
  WriteOptions keep;
  keep.create = true;
  keep.truncate = false;
  First(path).Answer(MessageType::kOpenWrite,
                     ResourceExhaustedError("the write-back budget is full"), /*times=*/3);
  const int64_t began = clock_.NowMicros();
  auto opened = client_->OpenForWrite(path, keep);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  (*opened)->Abort().IgnoreError();
  std::vector<MessageType> opens;
  for (MessageType type : First(path).received()) {
    if (type == MessageType::kOpenWrite) opens.push_back(type);
  }
  EXPECT_EQ(opens.size(), 4u);
  EXPECT_EQ(clock_.NowMicros() - began, 20'000 + 40'000 + 80'000);  // Backed off in between.
  EXPECT_TRUE(Second(path).received().empty());  // A refusal is an answer: no failover.

  First(path).Answer(MessageType::kOpenWrite,
                     ResourceExhaustedError("the write-back budget is full"));
  const int64_t second_began = clock_.NowMicros();
  auto refused = client_->OpenForWrite(path, keep);
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("no room came in 30 s"), std::string::npos)
      << refused.status().ToString();
  EXPECT_GE(clock_.NowMicros() - second_began, 30'000'000);
  EXPECT_LT(clock_.NowMicros() - second_began, 31'000'000);
}

// An open that truncates takes no room in the budget: a refusal is the worker's cap on files
// open for writing, answered at once (waiting in a FUSE thread could hold up the very closes
// that would lift it).
TEST_F(AskOwnersTest, AnOpenThatTruncatesIsNotSentAgainAfterARefusal) {
  const std::string path = "/wb/ckpt/new.pt";
  First(path).Answer(MessageType::kOpenWrite, ResourceExhaustedError("too many files open"),
                     /*times=*/1);
  WriteOptions create;
  create.create = true;
  create.truncate = true;
  const int64_t began = clock_.NowMicros();
  auto refused = client_->OpenForWrite(path, create);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(clock_.NowMicros(), began);
  EXPECT_EQ(First(path).received(), std::vector<MessageType>{MessageType::kOpenWrite});
}

// An open that keeps the content waits for room in the budget, not for the worker's cap on
// files open for writing: it waited 60 s (in a FUSE thread) and then failed with ENOSPC.
TEST_F(AskOwnersTest, AnOpenRefusedByTheOpenFilesCapIsNotWaitedOut) {
  const std::string path = "/wb/logs/train.log";
  First(path).Answer(MessageType::kOpenWrite,
                     ResourceExhaustedError("too many files open for writing by team-a")
                         .WithReason(StatusReason::kTooManyOpenFiles),
                     /*times=*/1);
  WriteOptions keep;
  keep.create = true;
  keep.truncate = false;
  const int64_t began = clock_.NowMicros();
  auto refused = client_->OpenForWrite(path, keep);
  EXPECT_EQ(refused.status().reason(), StatusReason::kTooManyOpenFiles);
  EXPECT_EQ(clock_.NowMicros(), began);
  EXPECT_EQ(First(path).received(), std::vector<MessageType>{MessageType::kOpenWrite});
}

}  // namespace
}  // namespace cairn::client
