// RemoteFileWriter against a scripted channel (no worker): retries spaced past the channel's
// fail-fast second, a close that takes no write after it began, a lost handle reported as an
// I/O error, a growing truncate that waits for room.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "client/file_writer.h"
#include "common/thread_annotations.h"

namespace cairn::client {
namespace {

using protocol::MessageType;
using Steady = std::chrono::steady_clock;

// Answers each write request with the next status scripted for its type (OK once none is
// left), records when each was sent, and can hold CloseWrite's answer until released.
class ScriptedChannel : public protocol::PageChannel {
 public:
  void Script(MessageType type, std::vector<Status> answers) {
    MutexLock l(&mu_);
    for (auto& s : answers) scripts_[type].push_back(std::move(s));
  }
  void HoldCloses() {
    MutexLock l(&mu_);
    hold_closes_ = true;
  }
  void HoldSyncs() {
    MutexLock l(&mu_);
    hold_syncs_ = true;
  }
  void ReleaseCloses() {
    std::vector<WriteCallback> held;
    {
      MutexLock l(&mu_);
      hold_closes_ = false;
      hold_syncs_ = false;
      held.swap(held_);
    }
    for (auto& done : held) done(protocol::WriteReply{});
  }
  bool CloseHeld() const {
    MutexLock l(&mu_);
    return !held_.empty();
  }
  std::vector<Steady::time_point> Sent(MessageType type) const {
    MutexLock l(&mu_);
    auto it = sent_.find(type);
    return it == sent_.end() ? std::vector<Steady::time_point>{} : it->second;
  }

  void Call(const protocol::Request&, std::span<char>, Callback done) override {
    done(UnavailableError("no pages here"));
  }
  void CallWrite(const protocol::WriteRequest& request, WriteCallback done) override {
    const MessageType type = protocol::TypeOf(request);
    Status answer;
    {
      MutexLock l(&mu_);
      sent_[type].push_back(Steady::now());
      if ((type == MessageType::kCloseWrite && hold_closes_) ||
          (type == MessageType::kSyncWrite && hold_syncs_)) {
        held_.push_back(std::move(done));
        return;
      }
      auto& script = scripts_[type];
      if (!script.empty()) {
        answer = script.front();
        script.pop_front();
      }
    }
    if (!answer.ok()) {
      done(answer);
      return;
    }
    protocol::WriteReply reply;
    if (const auto* t = std::get_if<protocol::TruncateWriteRequest>(&request)) reply.size = t->size;
    done(reply);
  }
  std::string Describe() const override { return "scripted"; }

 private:
  mutable Mutex mu_;
  std::map<MessageType, std::deque<Status>> scripts_ GUARDED_BY(mu_);
  std::map<MessageType, std::vector<Steady::time_point>> sent_ GUARDED_BY(mu_);
  bool hold_closes_ GUARDED_BY(mu_) = false;
  bool hold_syncs_ GUARDED_BY(mu_) = false;
  std::vector<WriteCallback> held_ GUARDED_BY(mu_);
};

class FileWriterChannelTest : public ::testing::Test {
 protected:
  std::unique_ptr<RemoteFileWriter> Writer(FileWriterOptions options = {}) {
    return std::make_unique<RemoteFileWriter>(channel_, "/wb/ckpt.pt", 42, 0, std::move(options));
  }
  std::shared_ptr<ScriptedChannel> channel_ = std::make_shared<ScriptedChannel>();
};

// A write issued while a sync of the same writer waits for its answer is not sent until the
// sync is answered: the worker would hold it behind the upload (seconds to minutes) and the
// channel would time it out after its 5 s, closing the connection.
TEST_F(FileWriterChannelTest, AWriteIssuedDuringASyncWaitsForIt) {
  auto writer = Writer();
  ASSERT_TRUE(writer->Write(0, "abc").ok());
  channel_->HoldSyncs();
  std::thread sync([&] { EXPECT_TRUE(writer->Sync().ok()); });
  while (!channel_->CloseHeld()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::atomic<bool> wrote{false};
  std::thread write([&] {
    EXPECT_TRUE(writer->Write(3, "def").ok());
    wrote = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(wrote.load());
  EXPECT_EQ(channel_->Sent(MessageType::kWritePage).size(), 1u);
  channel_->ReleaseCloses();
  sync.join();
  write.join();
  const auto writes = channel_->Sent(MessageType::kWritePage);
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_GE(writes[1], channel_->Sent(MessageType::kSyncWrite).at(0));
  ASSERT_TRUE(writer->Close().ok());
}

// A dropped connection fails the requests sent at once for a second (the channel's suspect
// time): a write sent again at once would spend its attempts without reaching the worker.
TEST_F(FileWriterChannelTest, AWriteThatFailedIsSentAgainAfterABackoff) {
  channel_->Script(MessageType::kWritePage,
                   {UnavailableError("connection reset").WithOutcomeUnknown(),
                    UnavailableError("worker suspect"), UnavailableError("worker suspect")});
  auto writer = Writer();
  ASSERT_TRUE(writer->Write(0, "weights").ok());
  auto closed = writer->Close();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  const auto sent = channel_->Sent(MessageType::kWritePage);
  ASSERT_EQ(sent.size(), 4u);
  // 250, 500, 1000 ms apart at least: past the suspect second before the last send.
  EXPECT_GE(sent[1] - sent[0], std::chrono::milliseconds(250));
  EXPECT_GE(sent[2] - sent[1], std::chrono::milliseconds(500));
  EXPECT_GE(sent[3] - sent[0], std::chrono::milliseconds(1750));
}

TEST_F(FileWriterChannelTest, AWriteFailsAfterMaxAttemptsSends) {
  channel_->Script(MessageType::kWritePage,
                   {UnavailableError("down"), UnavailableError("down"), UnavailableError("down")});
  FileWriterOptions options;
  options.max_attempts = 3;
  auto writer = Writer(options);
  ASSERT_TRUE(writer->Write(0, "weights").ok());
  auto closed = writer->Close();
  EXPECT_EQ(closed.status().code(), StatusCode::kUnavailable) << closed.status().ToString();
  EXPECT_EQ(channel_->Sent(MessageType::kWritePage).size(), 3u);
  EXPECT_TRUE(channel_->Sent(MessageType::kCloseWrite).empty());
}

// Room refusals are not attempts: a write that waited for room still has its retries.
TEST_F(FileWriterChannelTest, RefusalsForRoomDoNotSpendTheAttempts) {
  std::vector<Status> script;
  for (int i = 0; i < 4; ++i) script.push_back(ResourceExhaustedError("budget full"));
  script.push_back(UnavailableError("connection reset"));
  channel_->Script(MessageType::kWritePage, script);
  FileWriterOptions options;
  options.max_attempts = 2;
  auto writer = Writer(options);
  ASSERT_TRUE(writer->Write(0, "weights").ok());
  auto closed = writer->Close();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(channel_->Sent(MessageType::kWritePage).size(), 6u);
}

// A write from another thread while the close waits for the worker: refused, so no write can
// land after the commit (and be lost, or answered on a destroyed writer).
TEST_F(FileWriterChannelTest, AWriteDuringACloseIsRefused) {
  auto writer = Writer();
  ASSERT_TRUE(writer->Write(0, "weights").ok());
  channel_->HoldCloses();
  std::thread closer([&] { EXPECT_TRUE(writer->Close().ok()); });
  for (int i = 0; i < 5000 && !channel_->CloseHeld(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(channel_->CloseHeld());
  Status late = writer->Write(7, "more");
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition) << late.ToString();
  EXPECT_NE(late.message().find("being closed"), std::string::npos);
  channel_->ReleaseCloses();
  closer.join();
  EXPECT_EQ(channel_->Sent(MessageType::kWritePage).size(), 1u);
}

// The worker lost the handle (a restart, the idle abort): an I/O error of the open file (EIO
// through FUSE), not "no such file".
TEST_F(FileWriterChannelTest, ALostHandleIsAnIoErrorNotNoSuchFile) {
  channel_->Script(MessageType::kWritePage, {NotFoundError("no file open with this handle")});
  auto writer = Writer();
  ASSERT_TRUE(writer->Write(0, "weights").ok());
  auto closed = writer->Close();
  EXPECT_EQ(closed.status().code(), StatusCode::kIoError) << closed.status().ToString();
  channel_->Script(MessageType::kSyncWrite, {NotFoundError("no file open with this handle")});
  auto other = Writer();
  auto synced = other->Sync();
  EXPECT_EQ(synced.status().code(), StatusCode::kIoError) << synced.status().ToString();
  EXPECT_TRUE(other->Abort().ok());  // Gone already: nothing to abort.
}

// A commit whose answer was lost (the connection dropped under it, and the worker finished it)
// is sent again: the worker answers a sync with the commit it made. A close with changes
// commits them with such a sync first, and a lost answer to the close after it is no error
// (close(2) said EIO of a checkpoint that had landed).
TEST_F(FileWriterChannelTest, ACommitWhoseAnswerWasLostIsSentAgain) {
  FakeClock clock;
  FileWriterOptions options;
  options.clock = &clock;
  auto writer = Writer(options);
  ASSERT_TRUE(writer->Write(0, "weights").ok());
  channel_->Script(MessageType::kSyncWrite,
                   {UnavailableError("connection closed").WithOutcomeUnknown(),
                    DeadlineExceededError("no answer in time").WithOutcomeUnknown()});
  ASSERT_TRUE(writer->Sync().ok());
  EXPECT_EQ(channel_->Sent(MessageType::kSyncWrite).size(), 3u);
  ASSERT_TRUE(writer->Write(7, "more").ok());
  channel_->Script(MessageType::kSyncWrite,
                   {UnavailableError("connection closed").WithOutcomeUnknown()});
  channel_->Script(MessageType::kCloseWrite,
                   {UnavailableError("connection closed").WithOutcomeUnknown()});
  auto closed = writer->Close();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(channel_->Sent(MessageType::kSyncWrite).size(), 5u);
  EXPECT_EQ(channel_->Sent(MessageType::kCloseWrite).size(), 1u);
  // Past max_attempts sends, or refused for another reason: the commit's failure is reported.
  options.max_attempts = 3;
  auto other = Writer(options);
  ASSERT_TRUE(other->Write(0, "x").ok());
  channel_->Script(MessageType::kSyncWrite,
                   std::vector<Status>(3, UnavailableError("reset").WithOutcomeUnknown()));
  EXPECT_EQ(other->Close().status().code(), StatusCode::kUnavailable);
  // The worker's own answers (its source is down; the object changed) are not sent again.
  channel_->Script(MessageType::kSyncWrite, {UnavailableError("the source is down")});
  EXPECT_EQ(other->Close().status().code(), StatusCode::kUnavailable);
  channel_->Script(MessageType::kSyncWrite, {FailedPreconditionError("changed in the source")});
  EXPECT_EQ(other->Close().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(channel_->Sent(MessageType::kSyncWrite).size(), 10u);
  EXPECT_EQ(channel_->Sent(MessageType::kCloseWrite).size(), 1u);
  EXPECT_TRUE(other->Abort().ok());
}

// A request the channel never sent (the worker is suspect for a second after any request to
// it missed its deadline, or could not be connected to) is sent again after a backoff: an
// fsync or close in that second failed with EIO though nothing was tried (and the Python SDK
// dropped the file). Truncates and read-backs alike; a worker's own answer stays final.
TEST_F(FileWriterChannelTest, ACommitTheChannelNeverSentIsSentAgain) {
  FakeClock clock;
  FileWriterOptions options;
  options.clock = &clock;
  auto writer = Writer(options);
  ASSERT_TRUE(writer->Write(0, "weights").ok());
  const Status suspect =
      UnavailableError("worker w is suspect (recently unreachable)").WithNotSent();
  channel_->Script(MessageType::kSyncWrite, {suspect, suspect});
  const int64_t began = clock.NowMicros();
  ASSERT_TRUE(writer->Sync().ok());
  EXPECT_EQ(channel_->Sent(MessageType::kSyncWrite).size(), 3u);
  EXPECT_GE(clock.NowMicros() - began, 750'000);  // Past the suspect second.
  channel_->Script(MessageType::kTruncateWrite, {suspect});
  EXPECT_TRUE(writer->Truncate(3).ok());
  EXPECT_EQ(channel_->Sent(MessageType::kTruncateWrite).size(), 2u);
  channel_->Script(MessageType::kCloseWrite, {suspect});
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(channel_->Sent(MessageType::kCloseWrite).size(), 2u);
  // Never sent, max_attempts times: the failure.
  options.max_attempts = 2;
  auto other = Writer(options);
  ASSERT_TRUE(other->Write(0, "x").ok());
  channel_->Script(MessageType::kSyncWrite, {suspect, suspect});
  EXPECT_EQ(other->Sync().status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(other->Abort().ok());
}

TEST_F(FileWriterChannelTest, ATruncateThatGrowsTheFileWaitsForRoom) {
  channel_->Script(MessageType::kTruncateWrite,
                   {ResourceExhaustedError("budget full"), ResourceExhaustedError("budget full")});
  FakeClock clock;
  FileWriterOptions options;
  options.clock = &clock;
  options.room_wait = std::chrono::seconds(10);
  auto writer = Writer(options);
  ASSERT_TRUE(writer->Truncate(1 << 20).ok());
  EXPECT_EQ(writer->size(), 1u << 20);
  EXPECT_EQ(channel_->Sent(MessageType::kTruncateWrite).size(), 3u);
  // No room for longer than room_wait: ResourceExhausted (ENOSPC), saying so.
  std::vector<Status> refusals(100, ResourceExhaustedError("budget full"));
  channel_->Script(MessageType::kTruncateWrite, refusals);
  Status refused = writer->Truncate(2 << 20);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("no room came in 10 s"), std::string::npos)
      << refused.ToString();
  EXPECT_TRUE(writer->Abort().ok());
}

}  // namespace
}  // namespace cairn::client
