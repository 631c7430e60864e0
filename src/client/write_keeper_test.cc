// WriteKeeper on a fake clock, over a channel that records what it is sent: every open file's
// handle is kept alive a third of its worker's idle timeout after the last time, until the file
// is closed, aborted or dropped.
#include "client/write_keeper.h"

#include <gtest/gtest.h>

#include <thread>
#include <utility>
#include <vector>

#include "client/file_writer.h"
#include "common/thread_annotations.h"

namespace cairn::client {
namespace {

// Answers every write request with OK and records the handles of the KeepWrites.
class RecordingChannel : public protocol::PageChannel {
 public:
  void Call(const protocol::Request&, std::span<char>, Callback done) override {
    done(UnavailableError("no pages here"));
  }
  void CallWrite(const protocol::WriteRequest& request, WriteCallback done) override {
    if (const auto* keep = std::get_if<protocol::KeepWriteRequest>(&request)) {
      MutexLock l(&mu_);
      kept_.push_back(keep->handle);
      deadlines_ms_.push_back(keep->deadline_ms);
    }
    done(protocol::WriteReply{});
  }
  std::string Describe() const override { return "recording"; }
  std::vector<uint64_t> TakeKept() {
    MutexLock l(&mu_);
    return std::exchange(kept_, {});
  }
  std::vector<uint32_t> deadlines_ms() {
    MutexLock l(&mu_);
    return deadlines_ms_;
  }

 private:
  Mutex mu_;
  std::vector<uint64_t> kept_ GUARDED_BY(mu_);
  std::vector<uint32_t> deadlines_ms_ GUARDED_BY(mu_);
};

class WriteKeeperTest : public ::testing::Test {
 protected:
  WriteKeeperTest() {
    WriteKeeperOptions o;
    o.clock = &clock_;
    o.run_thread = false;
    keeper_ = std::make_shared<WriteKeeper>(o);
  }
  std::unique_ptr<RemoteFileWriter> Writer(uint64_t handle, std::chrono::milliseconds idle) {
    FileWriterOptions o;
    o.clock = &clock_;
    o.keeper = keeper_;
    o.idle_timeout = idle;
    return std::make_unique<RemoteFileWriter>(channel_, "/lake/log.txt", handle, 0, o);
  }

  FakeClock clock_;
  std::shared_ptr<RecordingChannel> channel_ = std::make_shared<RecordingChannel>();
  std::shared_ptr<WriteKeeper> keeper_;
};

TEST_F(WriteKeeperTest, AnOpenFileIsKeptEveryThirdOfItsTimeoutWhetherWrittenOrNot) {
  auto writer = Writer(7, std::chrono::minutes(10));
  EXPECT_EQ(keeper_->KeepDue(), 0u);  // Just opened: the open was its request.
  clock_.Advance(std::chrono::seconds(199));
  EXPECT_EQ(keeper_->KeepDue(), 0u);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(keeper_->KeepDue(), 1u);
  EXPECT_EQ(channel_->TakeKept(), std::vector<uint64_t>{7});
  EXPECT_EQ(keeper_->KeepDue(), 0u);  // Not again until the next third.
  ASSERT_TRUE(writer->Write(0, "a line\n").ok());
  clock_.Advance(std::chrono::seconds(200));
  EXPECT_EQ(keeper_->KeepDue(), 1u);
  EXPECT_EQ(channel_->TakeKept(), std::vector<uint64_t>{7});
  // Each KeepWrite waits for its answer no longer than until the next is due (at most 1 min).
  EXPECT_EQ(channel_->deadlines_ms().back(), 60'000u);
}

TEST_F(WriteKeeperTest, ClosedAbortedAndDroppedFilesAreNoLongerKept) {
  auto closed = Writer(1, std::chrono::seconds(3));
  auto aborted = Writer(2, std::chrono::seconds(3));
  auto dropped = Writer(3, std::chrono::seconds(3));
  auto open = Writer(4, std::chrono::seconds(3));
  EXPECT_EQ(keeper_->kept(), 4u);
  ASSERT_TRUE(closed->Close().ok());
  ASSERT_TRUE(aborted->Abort().ok());
  dropped.reset();
  EXPECT_EQ(keeper_->kept(), 1u);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(keeper_->KeepDue(), 1u);
  EXPECT_EQ(channel_->TakeKept(), std::vector<uint64_t>{4});
  EXPECT_EQ(channel_->deadlines_ms().back(), 1000u);
  open.reset();
  EXPECT_EQ(keeper_->kept(), 0u);
}

TEST_F(WriteKeeperTest, AWorkerThatNamesNoTimeoutIsNotSentKeeps) {
  auto writer = Writer(9, std::chrono::milliseconds(0));
  EXPECT_EQ(keeper_->kept(), 0u);
  clock_.Advance(std::chrono::hours(1));
  EXPECT_EQ(keeper_->KeepDue(), 0u);
}

TEST(WriteKeeperThreadTest, TheThreadKeepsHandlesOnItsOwn) {
  auto channel = std::make_shared<RecordingChannel>();
  WriteKeeper keeper;  // Real clock, its own thread.
  auto kept = keeper.Keep(channel, 5, std::chrono::milliseconds(30));
  ASSERT_NE(kept, nullptr);
  bool sent = false;
  for (int i = 0; i < 1000 && !sent; ++i) {
    sent = !channel->TakeKept().empty();
    if (!sent) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(sent) << "no KeepWrite in 10 s for a 30 ms timeout";
  keeper.Forget(kept);
  EXPECT_EQ(keeper.kept(), 0u);
}

}  // namespace
}  // namespace cairn::client
