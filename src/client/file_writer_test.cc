// RemoteFileWriter against a real write-back worker (in process) whose budget is full: a write
// the worker has no room for blocks and goes through once uploads make room, or fails after
// room_wait.
#include "client/file_writer.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "worker/local_channel.h"
#include "worker/write_back_fixture.h"

namespace cairn::client {
namespace {

class FileWriterRoomTest : public worker::WriteBackTest {
 protected:
  // `path` opened through the channel (as the anonymous principal of an in-process worker).
  std::unique_ptr<RemoteFileWriter> OpenWriter(const std::string& path,
                                               std::chrono::milliseconds room_wait) {
    channel_ = std::make_shared<worker::LocalChannel>(pages_.get(), writes_.get());
    protocol::OpenWriteRequest open;
    open.path = path;
    open.create = true;
    open.truncate = true;
    open.mode = protocol::WriteMode::kBack;
    std::promise<StatusOr<protocol::WriteReply>> opened;
    channel_->CallWrite(open, [&](StatusOr<protocol::WriteReply> r) { opened.set_value(r); });
    StatusOr<protocol::WriteReply> reply = opened.get_future().get();
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    if (!reply.ok()) return nullptr;
    FileWriterOptions options;
    options.room_wait = room_wait;
    return std::make_unique<RemoteFileWriter>(channel_, path, reply->handle, 0, options);
  }

  // A 100 KiB budget, the lake down, and 80 KiB of `chunk` waiting in one closed file.
  void FillTheBudget(const std::string& chunk) {
    Start(/*max_pending=*/100 << 10);
    SourceDown(true);
    ASSERT_TRUE(WriteFile("/lake/one.bin", chunk).ok());
  }
  // Writes `data` and closes: the first error.
  static StatusOr<FileInfo> WriteAndClose(RemoteFileWriter& writer, const std::string& data) {
    Status written = writer.Write(0, data);
    return written.ok() ? writer.Close() : StatusOr<FileInfo>(written);
  }

  std::shared_ptr<worker::LocalChannel> channel_;
};

TEST_F(FileWriterRoomTest, AWriteWithNoRoomWaitsUntilUploadsMakeRoom) {
  const std::string chunk = testing::RandomBytes(80 << 10, 7);
  ASSERT_NO_FATAL_FAILURE(FillTheBudget(chunk));
  auto writer = OpenWriter("/lake/two.bin", std::chrono::seconds(30));
  ASSERT_NE(writer, nullptr);
  // The lake comes back once the writer has been refused: its upload makes the room.
  std::thread lake([&] {
    (void)testing::WaitUntil(
        [&] { return Metric("cairn_worker_write_back_write_refusals_total") >= 1; });
    SourceDown(false);
  });
  StatusOr<FileInfo> closed = WriteAndClose(*writer, chunk);
  lake.join();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_GE(Metric("cairn_worker_write_back_write_refusals_total"), 1);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("one.bin"), chunk);
  EXPECT_EQ(Content("two.bin"), chunk);
}

TEST_F(FileWriterRoomTest, AWriteWithNoRoomFailsAfterRoomWaitAndKeepsNothing) {
  const std::string chunk = testing::RandomBytes(80 << 10, 8);
  ASSERT_NO_FATAL_FAILURE(FillTheBudget(chunk));
  auto writer = OpenWriter("/lake/two.bin", std::chrono::milliseconds(300));
  ASSERT_NE(writer, nullptr);
  StatusOr<FileInfo> closed = WriteAndClose(*writer, chunk);
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(closed.status().message().find("no room came in"), std::string::npos)
      << closed.status().ToString();
  EXPECT_GE(Metric("cairn_worker_write_back_write_refusals_total"), 2);  // Sent again first.
  EXPECT_TRUE(writer->Abort().ok());
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_FALSE(InSource("two.bin"));
  EXPECT_EQ(Content("one.bin"), chunk);
}

// Regression: a write refused for room is resent by the writer's next call that waits, and
// its room wait was timed from the refusal: a job that wrote, computed for longer than the
// wait, then closed got ENOSPC at the close's first resend, though nothing had waited.
TEST_F(FileWriterRoomTest, TheRoomWaitOfAnIdleWritersWriteStartsWhenACallWaits) {
  const std::string chunk = testing::RandomBytes(80 << 10, 9);
  ASSERT_NO_FATAL_FAILURE(FillTheBudget(chunk));
  auto writer = OpenWriter("/lake/two.bin", std::chrono::seconds(3));
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Write(0, chunk).ok());  // Refused: kept, to be sent again.
  EXPECT_EQ(Metric("cairn_worker_write_back_write_refusals_total"), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // The job computes.
  std::thread lake([&] {
    (void)testing::WaitUntil(
        [&] { return Metric("cairn_worker_write_back_write_refusals_total") >= 3; });
    SourceDown(false);
  });
  StatusOr<FileInfo> closed = writer->Close();
  lake.join();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("two.bin"), chunk);
}

}  // namespace
}  // namespace cairn::client
