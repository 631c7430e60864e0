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
  void Answer(protocol::MessageType type, Status status) {
    MutexLock l(&mu_);
    answers_[type] = std::move(status);
  }
  void CallWrite(const protocol::WriteRequest& request, protocol::PageChannel::WriteCallback done) {
    Status answer;
    {
      MutexLock l(&mu_);
      received_.push_back(protocol::TypeOf(request));
      if (auto it = answers_.find(protocol::TypeOf(request)); it != answers_.end()) {
        answer = it->second;
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
  std::map<protocol::MessageType, Status> answers_ GUARDED_BY(mu_);
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
    auto mounts = mount::MountTable::CreateWith(
        {spec}, {std::make_shared<ufs::MemoryUnderStorage>("mem://lake")});
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
    client_ = std::make_unique<ClientImpl>(options, *mounts, std::move(fetcher), Clock::Real());
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

  // An owner that was never reached (connection refused): the next one removes the file.
  First(path).Answer(MessageType::kRemovePath, UnavailableError("connection refused"));
  EXPECT_TRUE(client_->Remove(path).ok());
  EXPECT_EQ(Second(path).received(), std::vector<MessageType>{MessageType::kRemovePath});
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

}  // namespace
}  // namespace cairn::client
