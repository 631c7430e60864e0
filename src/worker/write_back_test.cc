// Write-back through the WriteService (docs/write-path.md, decision 6): close answers before the
// upload, the journal survives a restart of the service, failures are retried, files of one path
// land in order, removes cancel, conflicts are set aside, the budget refuses after a wait.
#include "worker/write_back.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include "worker/write_back_fixture.h"
#include "write/journal.h"

namespace cairn::worker {
namespace {

TEST_F(WriteBackTest, CloseAnswersBeforeTheUploadAndTheFileArrives) {
  SourceUnreachable(true);  // Neither open (create + truncate) nor close needs the source.
  const std::string content = testing::RandomBytes(3 * kPart + 77, 1);
  auto closed = WriteFile("/lake/ckpt/a.pt", content);
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_TRUE(closed->version.empty());  // Not in the source yet.
  EXPECT_EQ(closed->size, content.size());
  EXPECT_FALSE(InSource("ckpt/a.pt"));
  EXPECT_EQ(Metric("cairn_worker_write_back_pending_files"), 1);
  EXPECT_EQ(writes_->SyncPath("/lake", std::chrono::milliseconds(50)).code(),
            StatusCode::kDeadlineExceeded);
  // The queue keeps trying while the source is down (a wait, not a timing assertion).
  EXPECT_TRUE(
      testing::WaitUntil([&] { return Metric("cairn_worker_write_back_retries_total") >= 1; }));
  SourceUnreachable(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("ckpt/a.pt"), content);
  EXPECT_EQ(Metric("cairn_worker_write_back_pending_files"), 0);
  EXPECT_EQ(Metric("cairn_worker_write_back_commits_total"), 1);
}

TEST_F(WriteBackTest, WhatWasClosedSurvivesARestartAndIsUploadedOnce) {
  SourceDown(true);
  const std::string big = testing::RandomBytes(5 * kPart + 1, 2);
  const std::string small = "a small log line\n";
  ASSERT_TRUE(WriteFile("/lake/big.bin", big).ok());
  ASSERT_TRUE(WriteFile("/lake/logs/small.txt", small).ok());
  auto open = Open("/lake/never-closed.bin");  // Not closed: nothing was promised.
  ASSERT_TRUE(open.ok());
  ASSERT_TRUE(Write(open->handle, 0, "partial").ok());
  writes_.reset();  // The process goes (a restart; the crash tests kill it for real).
  SourceDown(false);
  Start();
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("big.bin"), big);
  EXPECT_EQ(Content("logs/small.txt"), small);
  EXPECT_FALSE(InSource("never-closed.bin"));
  EXPECT_EQ(Metric("cairn_worker_write_back_commits_total"), 2);
  // The spool empties (uploaded files are trimmed just after the queue lets go of them; the
  // unclosed one was dropped at the restart).
  EXPECT_TRUE(testing::WaitUntil([&] { return SpoolFileCount() == 0; }));
}

// The cache folder may be spelled otherwise at the next start (a trailing slash, a path through
// a symlink): the spool files the journal names are still recognised, not swept as unfinished
// writes' (which lost acknowledged files: their uploads found no spool file).
TEST_F(WriteBackTest, WaitingFilesSurviveARestartWithTheSpoolFolderSpelledOtherwise) {
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/a.bin", "acknowledged").ok());
  writes_.reset();
  // What a file open when the process died leaves (a clean stop removes it).
  std::ofstream(spool() + "/write-Stray1") << "partial";
  const std::filesystem::path link = dir_.path() / "spool-link";
  std::filesystem::create_directory_symlink(spool(), link);
  SourceDown(false);
  Start(1ull << 30, std::chrono::milliseconds(0),
        [&](WriteServiceOptions& o) { o.spool_dirs = {link.string() + "/"}; });
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("a.bin"), "acknowledged");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
  EXPECT_FALSE(std::filesystem::exists(spool() + "/write-Stray1"));  // Swept at the start.
  // And the uploaded file's went.
  EXPECT_TRUE(testing::WaitUntil([&] { return SpoolFileCount() == 0; }));
}

// A cache folder mounted elsewhere at the next start (the journal holds absolute paths): the
// waiting files' spool files are found there by name, uploaded, and kept meanwhile.
TEST_F(WriteBackTest, WaitingFilesSurviveARestartWithTheCacheFolderMovedElsewhere) {
  SourceDown(true);
  const std::string big = testing::RandomBytes(3 * kPart + 7, 29);
  ASSERT_TRUE(WriteFile("/lake/big.bin", big).ok());
  ASSERT_TRUE(WriteFile("/lake/small.txt", "small").ok());
  writes_.reset();
  const std::filesystem::path moved = dir_.path() / "elsewhere";
  std::filesystem::rename(spool(), moved);
  SourceDown(false);
  Start(1ull << 30, std::chrono::milliseconds(0),
        [&](WriteServiceOptions& o) { o.spool_dirs = {moved.string()}; });
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("big.bin"), big);
  EXPECT_EQ(Content("small.txt"), "small");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

// The cache disk not mounted yet at a start: its spool folder is an empty mount point. The
// start reported the waiting files lost (their spool files not found) and finished them; now
// it is refused, and the files go up once the disk is back.
TEST_F(WriteBackTest, AStartWithoutTheSpoolDiskIsRefusedAndLosesNothing) {
  SourceDown(true);
  const std::string content = testing::RandomBytes(2 * kPart + 3, 41);
  ASSERT_TRUE(WriteFile("/lake/ckpt.pt", content).ok());
  writes_.reset();
  const std::filesystem::path disk = dir_.path() / "spool-disk";
  std::filesystem::rename(spool(), disk);
  std::filesystem::create_directories(spool());  // The bare mount point.
  SourceDown(false);
  const Status refused = TryStart();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
  EXPECT_NE(refused.message().find("mounted"), std::string::npos) << refused.message();
  std::filesystem::remove_all(spool());
  std::filesystem::rename(disk, spool());
  Start();
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("ckpt.pt"), content);
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

// The journal's disk (the first cache folder's) not mounted at a start: a new journal began and
// the start swept the spool files of the other folders as unknown, though the missing journal
// names them. Now the start is refused, sweeping nothing.
TEST_F(WriteBackTest, AStartWithANewJournalDoesNotSweepTheFilesOfTheMissingOne) {
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/ckpt.pt", "acknowledged").ok());
  writes_.reset();
  const std::string journal = (dir_.path() / "journal").string();
  std::filesystem::rename(journal, journal + ".disk");
  SourceDown(false);
  const Status refused = TryStart();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
  EXPECT_NE(refused.message().find("another write-back journal"), std::string::npos);
  EXPECT_EQ(SpoolFileCount(), 1u);
  std::filesystem::rename(journal + ".disk", journal);
  Start();
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("ckpt.pt"), "acknowledged");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

// A journal that did not take a file's end after its upload (a failing or full disk) logged it
// and forgot it: the record stayed live for good (copied by every compaction), and every later
// start replayed the committed file, found no spool file and reported it lost (a conflict).
// Now the end is journaled again once the journal takes it.
TEST_F(WriteBackTest, AnEndTheJournalDidNotTakeIsJournaledOnceItCan) {
  const std::string journal = (dir_.path() / "journal").string();
  const std::string content = testing::RandomBytes(2 * kPart + 1, 51);
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/a.pt", content).ok());
  {
    testing::FileSizeLimit full(std::filesystem::file_size(journal));
    SourceDown(false);
    ASSERT_TRUE(
        testing::WaitUntil([&] { return Metric("cairn_worker_write_back_commits_total") == 1; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Retries fail meanwhile.
    EXPECT_EQ(writes_->write_back()->journal().live_records(), 1u);
  }
  EXPECT_TRUE(
      testing::WaitUntil([&] { return writes_->write_back()->journal().live_records() == 0; }));
  EXPECT_EQ(Content("a.pt"), content);
  writes_.reset();
  Start();
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
  EXPECT_EQ(Metric("cairn_worker_write_back_pending_files"), 0);
}

TEST_F(WriteBackTest, NewClosesAfterARestartDoNotReuseFinishedIds) {
  ASSERT_TRUE(WriteFile("/lake/one.txt", "1").ok());
  ASSERT_TRUE(SyncAll().ok());
  for (int restart = 0; restart < 2; ++restart) {
    writes_.reset();
    Start();  // The journal holds only finished records.
    ASSERT_TRUE(WriteFile("/lake/two.txt", std::to_string(restart)).ok());
    ASSERT_TRUE(SyncAll().ok());
  }
  EXPECT_EQ(Content("two.txt"), "1");
}

TEST_F(WriteBackTest, AFileCommittedBeforeItsRecordWasTrimmedIsNotWrittenAgain) {
  SourceDown(true);
  const std::string content = testing::RandomBytes(2 * kPart + 5, 3);
  ASSERT_TRUE(WriteFile("/lake/x.bin", content).ok());
  writes_.reset();
  // As if the commit landed and the process died before journaling it.
  const std::string version = memory_->Put("x.bin", content);
  SourceDown(false);
  Start();
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(memory_->Stat("x.bin")->version, version);  // Not replaced.
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
  EXPECT_EQ(Metric("cairn_worker_write_back_commits_total"), 1);
}

TEST_F(WriteBackTest, ASourceChangedUnderAClosedFileSetsItAside) {
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/shared.txt", "ours").ok());
  memory_->Put("shared.txt", "someone else's");  // Written to the bucket directly meanwhile.
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("shared.txt"), "someone else's");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 1);
  EXPECT_EQ(ConflictSizes(), std::vector<uintmax_t>{4});
}

// A spool file found shorter than its journal record after a restart (a failing disk) cannot
// be uploaded; it is kept in conflicts/ for an operator, as any file set aside, not left in the
// spool folder for the next start to sweep.
TEST_F(WriteBackTest, AShortSpoolFileFoundAtAStartIsKeptAsAConflict) {
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/short.bin", "twelve bytes").ok());
  writes_.reset();
  for (const auto& e : std::filesystem::directory_iterator(spool())) {
    if (e.path().filename().string().rfind("write-", 0) == 0) {
      std::filesystem::resize_file(e.path(), 5);
    }
  }
  SourceDown(false);
  Start();
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_FALSE(InSource("short.bin"));
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 1);
  EXPECT_EQ(ConflictSizes(), std::vector<uintmax_t>{5});
}

// Ids start again after a restart whose journal had nothing pending (compacted to nothing): the
// same job conflicting again on the same path gets the same id, and its kept file must not
// replace the one kept before.
TEST_F(WriteBackTest, AConflictKeptUnderAnIdSeenBeforeDoesNotReplaceTheFirst) {
  memory_->Put("shared.txt", "someone else's");
  for (const std::string ours : {"first", "second"}) {
    writes_.reset();
    std::filesystem::remove(dir_.path() / "journal");
    Start();
    SourceDown(true);
    ASSERT_TRUE(WriteFile("/lake/shared.txt", ours).ok());
    memory_->Put("shared.txt", "someone else's, " + ours);
    SourceDown(false);
    ASSERT_TRUE(SyncAll().ok());
  }
  std::set<std::string> kept;
  for (const auto& e : std::filesystem::directory_iterator(spool() + "/conflicts")) {
    std::ifstream in(e.path());
    kept.insert(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  EXPECT_EQ(kept, (std::set<std::string>{"first", "second"}));
}

// A conflict that cannot be set aside (the conflicts folder cannot be made) is not dropped: the
// file stays pending, spool file and journal record kept, and is set aside once it can be.
TEST_F(WriteBackTest, AConflictThatCannotBeSetAsideStaysPendingUntilItCan) {
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/shared.txt", "ours").ok());
  memory_->Put("shared.txt", "someone else's");
  const std::string conflicts = spool() + "/conflicts";
  std::filesystem::remove_all(conflicts);
  {
    std::ofstream blocker(conflicts);
    blocker << "a file where the folder goes";
  }
  const double retries = Metric("cairn_worker_write_back_retries_total");
  SourceDown(false);
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return Metric("cairn_worker_write_back_retries_total") >= retries + 2; }));
  EXPECT_TRUE(Pending("/lake/shared.txt"));
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
  std::filesystem::remove(conflicts);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 1);
  size_t kept = 0;
  for (const auto& e : std::filesystem::directory_iterator(conflicts)) {
    ++kept;
    EXPECT_EQ(std::filesystem::file_size(e.path()), 4u);
  }
  EXPECT_EQ(kept, 1u);
  EXPECT_EQ(Content("shared.txt"), "someone else's");
}

// The closed file's spool file, the one `write-*` file of the spool folder.
std::string OnlySpoolFile(const std::string& spool) {
  std::string found;
  for (const auto& e : std::filesystem::directory_iterator(spool)) {
    if (e.is_regular_file() && e.path().filename().string().rfind("write-", 0) == 0) {
      EXPECT_TRUE(found.empty()) << "more than one spool file";
      found = e.path().string();
    }
  }
  return found;
}

// A spool file damaged on disk while its file waits for the upload (a failing disk) is set
// aside, never uploaded: checked against the digest made at the close, also after a restart
// (the journal keeps it).
TEST_F(WriteBackTest, ASpoolFileDamagedWhileItWaitsIsSetAsideNotUploaded) {
  const std::string content = testing::RandomBytes(3 * kPart + 9, 4);
  for (bool restart : {false, true}) {
    Start(1ull << 30, std::chrono::hours(1));  // Nothing goes up until the sync.
    const std::string path = restart ? "/lake/after-restart.bin" : "/lake/model.bin";
    ASSERT_TRUE(WriteFile(path, content).ok());
    ASSERT_TRUE(testing::FlipByteAt(OnlySpoolFile(spool()), restart ? 5 : kPart + 1));
    if (restart) Start(1ull << 30, std::chrono::hours(1));
    ASSERT_TRUE(SyncAll().ok());
    EXPECT_FALSE(InSource(path.substr(6))) << path;
    EXPECT_EQ(Metric("cairn_worker_write_back_damaged_spools_total"), 1) << path;
    EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 1) << path;
  }
  size_t kept = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator(spool() + "/conflicts")) {
    ++kept;
  }
  EXPECT_EQ(kept, 2u);
  // An intact file still goes up (its digest matches).
  ASSERT_TRUE(WriteFile("/lake/intact.bin", content).ok());
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("intact.bin"), content);
}

// A write that goes on from a waiting file (an open without truncate, a write after a sync)
// copies its sealed spool file; a copy of a damaged one is refused, not continued, or its bytes
// would get a new digest and go up with the newer content. (After a restart the open checks
// against the journal's digest, the same record fields; the queue tries replayed files at once,
// so a test cannot hold one damaged file for an open.) The damaged file itself is set aside at
// its upload, as ever.
TEST_F(WriteBackTest, AWaitingFileDamagedOnDiskIsNotContinued) {
  const std::string content = testing::RandomBytes(2 * kPart + 9, 5);
  Start(1ull << 30, std::chrono::hours(1));  // Nothing goes up until the sync.
  ASSERT_TRUE(WriteFile("/lake/reopened.bin", content).ok());
  ASSERT_TRUE(testing::FlipByteAt(OnlySpoolFile(spool()), kPart + 3));
  // An I/O error, not Corruption, which a client sends again (and each try would copy it).
  EXPECT_EQ(Open("/lake/reopened.bin", /*truncate=*/false).status().code(), StatusCode::kIoError);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Metric("cairn_worker_write_back_damaged_spools_total"), 1);
  EXPECT_FALSE(InSource("reopened.bin"));

  auto opened = Open("/lake/synced.bin");
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(Write(opened->handle, 0, content).ok());
  ASSERT_TRUE(writes_->Serve("team-a", protocol::SyncWriteRequest{0, opened->handle}).ok());
  ASSERT_TRUE(testing::FlipByteAt(OnlySpoolFile(spool()), 7));
  EXPECT_EQ(Write(opened->handle, content.size(), "more").code(), StatusCode::kIoError);
  // Intact, the same goes on from the waiting content.
  ASSERT_TRUE(WriteFile("/lake/intact.bin", content).ok());
  auto intact = Open("/lake/intact.bin", /*truncate=*/false);
  ASSERT_TRUE(intact.ok()) << intact.status().ToString();
  ASSERT_TRUE(Write(intact->handle, content.size(), "more").ok());
  ASSERT_TRUE(Close(intact->handle).ok());
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("intact.bin"), content + "more");
}

TEST_F(WriteBackTest, ClosesOfOnePathLandInOrderAndTheLastWins) {
  SourceDown(true);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(WriteFile("/lake/latest.txt", "version " + std::to_string(i)).ok());
  }
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("latest.txt"), "version 4");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
  EXPECT_EQ(Metric("cairn_worker_write_back_commits_total"), 5);
}

TEST_F(WriteBackTest, AnOpenContinuesFromTheNewestPendingContent) {
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/log.txt", "line 1\n").ok());
  auto again = Open("/lake/log.txt", /*truncate=*/false);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->size, 7u);
  ASSERT_TRUE(Write(again->handle, 7, "line 2\n").ok());
  ASSERT_TRUE(Close(again->handle).ok());
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("log.txt"), "line 1\nline 2\n");
}

TEST_F(WriteBackTest, WritesAfterASyncContinueTheFile) {
  auto opened = Open("/lake/grow.bin");
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(Write(opened->handle, 0, "first,").ok());
  ASSERT_TRUE(writes_->Serve("team-a", protocol::SyncWriteRequest{0, opened->handle}).ok());
  ASSERT_TRUE(Write(opened->handle, 6, "second").ok());
  ASSERT_TRUE(Close(opened->handle).ok());
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("grow.bin"), "first,second");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

// ReadWritten of a write-back file: before its close, after a sync (the sealed spool file
// answers: the session went to the upload queue), and a foreign principal gets nothing.
TEST_F(WriteBackTest, AFileOpenForWritingReadsBackBeforeAndAfterItsSync) {
  SourceDown(true);  // Nothing reaches the lake: every byte read comes from the worker.
  auto opened = Open("/lake/readback.bin");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_TRUE(Write(opened->handle, 0, "hello, ").ok());
  ASSERT_TRUE(Write(opened->handle, 10, "world").ok());
  auto read = [&](uint64_t offset, uint32_t length, const std::string& who = "team-a") {
    return writes_->Serve(who, protocol::ReadWrittenRequest{0, opened->handle, offset, length});
  };
  auto got = read(0, 100);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->data, std::string("hello, \0\0\0world", 15));
  EXPECT_EQ(got->size, 15u);
  ASSERT_TRUE(writes_->Serve("team-a", protocol::SyncWriteRequest{0, opened->handle}).ok());
  got = read(7, 100);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->data, std::string("\0\0\0world", 8));
  got = read(15, 1);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->data.empty());
  EXPECT_EQ(read(0, 100, "team-b").status().code(), StatusCode::kNotFound);
  SourceDown(false);
  ASSERT_TRUE(Close(opened->handle).ok());
  EXPECT_EQ(read(0, 100).status().code(), StatusCode::kNotFound);  // The handle is gone.
}

TEST_F(WriteBackTest, ARemoveCancelsThePendingUpload) {
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/tmp.bin", "scratch").ok());
  SourceDown(false);
  // The queue may be retrying right now: the remove still wins.
  ASSERT_TRUE(Remove("/lake/tmp.bin").ok());
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_FALSE(InSource("tmp.bin"));
}

// A remove that fails changes nothing, as a failed unlink(2) does: the file's waiting content
// stays and lands once the source is back. (The waiting files were dropped before the source was
// asked: the failed remove brought the older object back under the name.)
TEST_F(WriteBackTest, ARemoveTheSourceDoesNotAnswerLeavesTheWaitingFile) {
  ASSERT_TRUE(WriteFile("/lake/ckpt.pt", "first").ok());
  ASSERT_TRUE(SyncAll().ok());  // In the source: a remove must ask it.
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/ckpt.pt", "second").ok());
  SourceUnreachable(true);
  EXPECT_FALSE(Remove("/lake/ckpt.pt").ok());
  EXPECT_TRUE(Pending("/lake/ckpt.pt"));
  SourceUnreachable(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("ckpt.pt"), "second");
  // Once the source answers, the remove takes both: the object and anything waiting.
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/ckpt.pt", "third").ok());
  SourceDown(false);
  ASSERT_TRUE(Remove("/lake/ckpt.pt").ok());
  EXPECT_FALSE(Pending("/lake/ckpt.pt"));
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_FALSE(InSource("ckpt.pt"));
}

// A waiting file is never renamed over a directory, as the source's own rename refuses it (it
// was answered OK; the name became a file and a directory at once, or its upload found the
// name taken and set the file aside).
TEST_F(WriteBackTest, AWaitingFileIsNotRenamedOntoADirectory) {
  memory_->Put("runs/1/log.txt", "a file in a folder");
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/ckpt.tmp", "weights").ok());
  ASSERT_TRUE(WriteFile("/lake/out/shard-0", "waiting in a folder of its own").ok());
  for (const char* directory : {"/lake/runs", "/lake/runs/1", "/lake/out"}) {
    Status renamed = Rename("/lake/ckpt.tmp", directory);
    EXPECT_EQ(renamed.code(), StatusCode::kInvalidArgument) << directory << renamed.ToString();
  }
  EXPECT_TRUE(Pending("/lake/ckpt.tmp"));
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("ckpt.tmp"), "weights");
  EXPECT_FALSE(InSource("runs"));
  EXPECT_FALSE(InSource("out"));
  EXPECT_TRUE(ConflictSizes().empty());
}

// A folder whose only files wait here is not empty: removing it is refused (it succeeded, or
// said "no such directory", and the uploads brought it back).
TEST_F(WriteBackTest, AFolderHoldingWaitingFilesIsNotEmpty) {
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/d/f", "waiting").ok());
  protocol::RemovePathRequest rmdir;
  rmdir.path = "/lake/d";
  rmdir.directory = true;
  EXPECT_EQ(writes_->Serve("team-a", rmdir).status().code(), StatusCode::kFailedPrecondition);
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("d/f"), "waiting");
  ASSERT_TRUE(Remove("/lake/d/f").ok());
}

// In a cluster a file waits at the owner of its own path, so the files of a folder usually
// wait at other workers: an rmdir asks them (it was answered OK here, and the uploads brought
// the folder back).
TEST_F(WriteBackTest, AFolderWhoseFilesWaitAtOtherWorkersIsNotEmptyHere) {
  std::atomic<int> asked{0};
  Start(1ull << 30, std::chrono::milliseconds(0), [&](WriteServiceOptions& wo) {
    wo.pending_at_peers = [&](const std::string& dir) {
      ++asked;
      std::vector<protocol::DirEntry> children;
      if (dir == "/lake/out") children.push_back({"shard-0", false, 4, "pending-version", 0});
      return children;
    };
  });
  protocol::RemovePathRequest rmdir;
  rmdir.path = "/lake/out";
  rmdir.directory = true;
  Status removed = writes_->Serve("team-a", rmdir).status();
  EXPECT_EQ(removed.code(), StatusCode::kFailedPrecondition) << removed.ToString();
  EXPECT_EQ(asked.load(), 1);

  // A rename of a waiting file (every checkpoint's) does not ask them.
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/ckpt.tmp", "weights").ok());
  ASSERT_TRUE(Rename("/lake/ckpt.tmp", "/lake/ckpt").ok());
  EXPECT_EQ(asked.load(), 1);
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("ckpt"), "weights");
  // An empty folder of the source is removed once no worker holds files under it.
  ASSERT_TRUE(memory_->MakeDir("empty").ok());
  rmdir.path = "/lake/empty";
  removed = writes_->Serve("team-a", rmdir).status();
  EXPECT_TRUE(removed.ok()) << removed.ToString();
}

TEST_F(WriteBackTest, AFullBudgetRefusesWritesUntilUploadsMakeRoom) {
  Start(/*max_pending=*/100 << 10);
  SourceDown(true);
  const std::string chunk = testing::RandomBytes(80 << 10, 4);
  ASSERT_TRUE(WriteFile("/lake/one.bin", chunk).ok());
  auto second = Open("/lake/two.bin");
  ASSERT_TRUE(second.ok());
  // The spool file would pass the budget: refused before anything is spooled, not at close.
  Status refused = Write(second->handle, 0, chunk);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("write-back budget is full"), std::string::npos);
  EXPECT_EQ(Metric("cairn_worker_write_back_write_refusals_total"), 1);
  // What fits is taken.
  ASSERT_TRUE(Write(second->handle, 0, chunk.substr(0, 20 << 10)).ok());
  EXPECT_EQ(Metric("cairn_worker_write_back_open_bytes"), 20 << 10);
  SourceDown(false);
  ASSERT_TRUE(
      testing::WaitUntil([&] { return Metric("cairn_worker_write_back_pending_files") == 0; }));
  ASSERT_TRUE(Write(second->handle, 0, chunk).ok());  // The client sends it again: room now.
  ASSERT_TRUE(Close(second->handle).ok());
  EXPECT_EQ(Metric("cairn_worker_write_back_open_bytes"), 0);  // Handed to the queue.
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("two.bin"), chunk);
}

// The count of waiting files is bounded too (each holds its spool file open): a close past it
// waits for room, then fails (ENOSPC) and keeps the file open, to be closed again later.
TEST_F(WriteBackTest, HowManyFilesWaitIsBoundedAndACloseWaitsForRoom) {
  Start(1ull << 30, std::chrono::milliseconds(0),
        [](WriteServiceOptions& o) { o.write_back.max_pending_files = 2; });
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/1.log", "one").ok());
  ASSERT_TRUE(WriteFile("/lake/2.log", "two").ok());
  auto third = Open("/lake/3.log");
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(Write(third->handle, 0, "three").ok());
  auto refused = Close(third->handle);
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("at most"), std::string::npos);
  EXPECT_EQ(Metric("cairn_worker_write_back_pending_files"), 2);
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  ASSERT_TRUE(Close(third->handle).ok());  // Closed again: room now.
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("3.log"), "three");
}

// A close waiting for room does not hold its file's lock: the upload that makes the room, of an
// earlier file of the same path, adopts its new version into that path's open files (a log
// fsync'd through an outage until the waiting files fill the budget: the close failed with
// ENOSPC once the lake was back, the upload stuck behind it).
TEST_F(WriteBackTest, ACloseWaitingForRoomDoesNotBlockTheUploadThatMakesIt) {
  Start(1ull << 30, std::chrono::milliseconds(0), [](WriteServiceOptions& o) {
    o.write_back.max_pending_files = 2;
    o.write_back.full_wait = std::chrono::seconds(20);
  });
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/train.log", "step 1").ok());
  ASSERT_TRUE(WriteFile("/lake/train.log", "step 1, 2").ok());
  auto third = Open("/lake/train.log");
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(Write(third->handle, 0, "step 1, 2, 3").ok());
  StatusOr<protocol::WriteReply> closed = InternalError("not run");
  std::thread closer([&] { closed = Close(third->handle); });
  for (int i = 0; i < 5000 && Metric("cairn_worker_write_back_full_waits_total") < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(Metric("cairn_worker_write_back_full_waits_total"), 1);
  // The file still takes writes while its close (or a sync) waits: it is sealed only with room.
  ASSERT_TRUE(Write(third->handle, 12, ", 4").ok());
  const auto back = std::chrono::steady_clock::now();
  SourceDown(false);
  closer.join();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - back, std::chrono::seconds(20));
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("train.log"), "step 1, 2, 3, 4");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

TEST_F(WriteBackTest, OneFileLargerThanTheBudgetIsTakenWhileItIsAlone) {
  Start(/*max_pending=*/100 << 10);
  SourceDown(true);
  const std::string big = testing::RandomBytes(150 << 10, 5);
  auto first = Open("/lake/big.bin");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(Write(first->handle, 0, big).ok());
  auto second = Open("/lake/small.bin");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(Write(second->handle, 0, "x").code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(Close(first->handle).ok());  // Its reservation covers it: no wait.
  EXPECT_EQ(Metric("cairn_worker_write_back_full_waits_total"), 0);
  EXPECT_EQ(Write(second->handle, 0, "x").code(), StatusCode::kResourceExhausted);
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  ASSERT_TRUE(Write(second->handle, 0, "x").ok());
  ASSERT_TRUE(Close(second->handle).ok());
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("big.bin"), big);
  EXPECT_EQ(Content("small.bin"), "x");
}

// A log appended to once an epoch through an outage of the source: the file still waiting here
// is the current content, so the append needs no answer from the source. A file with nothing
// waiting here still does (its content is in the source).
TEST_F(WriteBackTest, AFileWaitingHereIsAppendedToWhileTheSourceIsUnreachable) {
  memory_->Put("elsewhere.log", "in the source only\n");
  SourceUnreachable(true);
  ASSERT_TRUE(WriteFile("/lake/train.log", "epoch 1\n").ok());
  for (const std::string line : {"epoch 2\n", "epoch 3\n"}) {
    auto opened = Open("/lake/train.log", /*truncate=*/false);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    ASSERT_TRUE(Write(opened->handle, opened->size, line).ok());
    ASSERT_TRUE(Close(opened->handle).ok());
  }
  protocol::OpenWriteRequest exclusive;
  exclusive.path = "/lake/train.log";
  exclusive.create = true;
  exclusive.exclusive = true;
  EXPECT_EQ(writes_->Serve("team-a", exclusive).status().code(), StatusCode::kAlreadyExists);
  // A file known to exist (an open without create) cannot start without the source.
  protocol::OpenWriteRequest append;
  append.path = "/lake/elsewhere.log";
  append.create = false;
  EXPECT_EQ(writes_->Serve("team-a", append).status().code(), StatusCode::kUnavailable);
  // A create that keeps what is there (O_CREAT|O_APPEND of a name the client did not see)
  // starts empty expecting the name absent: a new log lands, and one that was there after all
  // is left as it is, the appended part set aside (a conflict), never put in its place.
  for (const char* path : {"/lake/new.log", "/lake/elsewhere.log"}) {
    auto opened = Open(path, /*truncate=*/false);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_EQ(opened->size, 0u);
    ASSERT_TRUE(Write(opened->handle, 0, "appended\n").ok());
    ASSERT_TRUE(Close(opened->handle).ok());
  }
  EXPECT_FALSE(InSource("train.log"));
  SourceUnreachable(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("train.log"), "epoch 1\nepoch 2\nepoch 3\n");
  EXPECT_EQ(Content("new.log"), "appended\n");
  EXPECT_EQ(Content("elsewhere.log"), "in the source only\n");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 1);
  EXPECT_EQ(ConflictSizes(), std::vector<uintmax_t>{9});
}

// An open that keeps the content (an append to a log, a partial rewrite) needs room for all of
// it at once: refused before the object is read (the client sends the open again while uploads
// make room; RoomWait), so a refused open costs no transfer from the source.
TEST_F(WriteBackTest, AnOpenWithoutRoomForTheContentItKeepsIsRefusedBeforeReadingIt) {
  Start(/*max_pending=*/100 << 10);
  const std::string log = testing::RandomBytes(60 << 10, 41);
  memory_->Put("train.log", log);
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/one.bin", testing::RandomBytes(50 << 10, 42)).ok());
  const uint64_t reads_before = faults_->calls(ufs::UfsOp::kRead);
  auto refused = Open("/lake/train.log", /*truncate=*/false);
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("write-back budget is full"), std::string::npos);
  EXPECT_EQ(faults_->calls(ufs::UfsOp::kRead), reads_before);
  EXPECT_EQ(writes_->write_back()->reserved_bytes(), 0u);  // Nothing held by the refusal.
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  auto opened = Open("/lake/train.log", /*truncate=*/false);  // Sent again: room now.
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->size, log.size());
  EXPECT_EQ(writes_->write_back()->reserved_bytes(), log.size());
  ASSERT_TRUE(Write(opened->handle, log.size(), "epoch 2\n").ok());
  ASSERT_TRUE(Close(opened->handle).ok());
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("train.log"), log + "epoch 2\n");
}

TEST_F(WriteBackTest, AnOpenFileGivesBackItsRoomWhenTruncatedAbortedOrDropped) {
  Start(/*max_pending=*/100 << 10);
  SourceDown(true);
  WriteBack* queue = writes_->write_back();
  auto file = Open("/lake/a.bin");
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(Write(file->handle, 0, testing::RandomBytes(60 << 10, 6)).ok());
  EXPECT_EQ(queue->reserved_bytes(), 60u << 10);
  protocol::TruncateWriteRequest truncate;
  truncate.handle = file->handle;
  truncate.size = 10 << 10;
  ASSERT_TRUE(writes_->Serve("team-a", truncate).ok());
  EXPECT_EQ(queue->reserved_bytes(), 10u << 10);
  truncate.size = 90 << 10;  // Growing by truncate takes room too (the upload sends zeros).
  ASSERT_TRUE(writes_->Serve("team-a", truncate).ok());
  EXPECT_EQ(queue->reserved_bytes(), 90u << 10);
  truncate.size = 120 << 10;
  auto other = Open("/lake/b.bin");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(Write(other->handle, 0, "y").ok());
  EXPECT_EQ(writes_->Serve("team-a", truncate).status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(writes_->Serve("team-a", protocol::AbortWriteRequest{0, file->handle}).ok());
  EXPECT_EQ(queue->reserved_bytes(), 1u);
  ASSERT_TRUE(Close(other->handle).ok());
  EXPECT_EQ(queue->reserved_bytes(), 0u);
  // A file whose writer went away (the idle reaper, a restart) gives its room back too.
  auto third = Open("/lake/c.bin");
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(Write(third->handle, 0, "zz").ok());
  EXPECT_EQ(queue->reserved_bytes(), 2u);
  writes_.reset();
  Start(/*max_pending=*/100 << 10);
  EXPECT_EQ(writes_->write_back()->reserved_bytes(), 0u);
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("b.bin"), "y");
  EXPECT_FALSE(InSource("a.bin"));
  EXPECT_FALSE(InSource("c.bin"));
}

// A rename's delete of the old name's older object that fails may have gone through all the
// same (a DELETE whose answer was lost, then retries that failed otherwise): the source's stat
// decides. Gone: the rename goes on. Still there: it fails, and the waiting file still expects
// that object (before 12-07 a failed delete always failed the rename and the file expected the
// object, which was gone: set aside as a conflict).
TEST_F(WriteBackTest, ARenameWhoseDeleteFailedAsksTheSourceWhetherItHappened) {
  Start(1ull << 30, std::chrono::hours(1));  // Nothing goes up until a sync asks.
  memory_->Put("gone.tmp", "an older upload");
  memory_->Put("kept.tmp", "an older upload");
  ASSERT_TRUE(WriteFile("/lake/gone.tmp", "newer").ok());
  ASSERT_TRUE(WriteFile("/lake/kept.tmp", "newer too").ok());
  ufs::FaultSpec refused;
  refused.failure_probability = 1.0;
  refused.status = UnavailableError("injected: the answer to the delete was lost");
  faults_->SetFault(ufs::UfsOp::kDelete, refused);
  ASSERT_TRUE(memory_->Delete("gone.tmp").ok());  // What the lost answer hid.
  EXPECT_TRUE(Rename("/lake/gone.tmp", "/lake/gone.pt").ok());
  EXPECT_FALSE(Rename("/lake/kept.tmp", "/lake/kept.pt").ok());
  faults_->SetFault(ufs::UfsOp::kDelete, ufs::FaultSpec{});
  writes_.reset();  // What the journal says survives a restart.
  Start();
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("gone.pt"), "newer");
  EXPECT_FALSE(InSource("gone.tmp"));
  EXPECT_EQ(Content("kept.tmp"), "newer too");
  EXPECT_FALSE(InSource("kept.pt"));
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

// Holds of a name by renames are counted: one rename letting go leaves the name held by the
// other (before 12-07 a hold was one flag per file, and a rename onto a file being passed to
// another worker that gave up let the queue upload it there: both names ended in the source).
TEST_F(WriteBackTest, ANameHeldByTwoRenamesStaysHeldUntilBothLetGo) {
  Start(1ull << 30, std::chrono::hours(1));  // Nothing goes up until a sync asks.
  ASSERT_TRUE(WriteFile("/lake/ckpt.pt", "weights").ok());
  WriteBack& queue = *writes_->write_back();
  bool passing = false;   // A hand-over of ckpt.pt to another worker.
  bool renaming = false;  // A rename of ckpt.pt in this one.
  ASSERT_EQ(queue.Hold("/lake/ckpt.pt", "/lake/ckpt.pt", &passing), WriteBack::HoldResult::kHeld);
  ASSERT_EQ(queue.Hold("/lake/ckpt.pt", "/lake/other.pt", &renaming), WriteBack::HoldResult::kHeld);
  // Asking again takes no second hold.
  ASSERT_EQ(queue.Hold("/lake/ckpt.pt", "/lake/other.pt", &renaming), WriteBack::HoldResult::kHeld);
  queue.Unhold("/lake/ckpt.pt", "/lake/other.pt", &renaming);
  EXPECT_FALSE(renaming);
  EXPECT_EQ(writes_->SyncPath("/", std::chrono::milliseconds(300)).code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(InSource("ckpt.pt"));  // Still held by the hand-over.
  queue.Unhold("/lake/ckpt.pt", "/lake/ckpt.pt", &passing);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("ckpt.pt"), "weights");
}

TEST_F(WriteBackTest, ARenameOfAPendingFileMovesItsUploadWithoutWaiting) {
  SourceDown(true);  // No upload can happen: the rename must not need one.
  memory_->Put("ckpt.tmp", "an old upload of the temporary name");
  ASSERT_TRUE(WriteFile("/lake/ckpt.tmp", "weights").ok());
  ASSERT_TRUE(Rename("/lake/ckpt.tmp", "/lake/ckpt.pt").ok());
  EXPECT_TRUE(Pending("/lake/ckpt.pt"));
  EXPECT_FALSE(Pending("/lake/ckpt.tmp"));
  EXPECT_FALSE(InSource("ckpt.tmp"));  // Nothing of the old name survives the rename.
  writes_.reset();                     // The move is journaled: it survives a restart.
  Start();
  EXPECT_TRUE(Pending("/lake/ckpt.pt"));
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("ckpt.pt"), "weights");
  EXPECT_FALSE(InSource("ckpt.tmp"));
}

// The checkpoint idiom while the lake is down: a new file saved under a temporary name, then
// renamed (and a scratch file removed), before any upload of it began. Nothing of them can be
// in the source, so neither asks it; a file whose name the source held (an older object) still
// needs the source to delete it, and its rename fails until the lake is back.
TEST_F(WriteBackTest, NewFilesAreRenamedAndRemovedWithoutTheSource) {
  Start(1ull << 30, std::chrono::seconds(30));  // No upload begins by itself.
  memory_->Put("old.tmp", "an object the source holds");
  const std::string data = testing::RandomBytes(2 * kPart + 5, 17);
  ASSERT_TRUE(WriteFile("/lake/ckpt.tmp", data).ok());
  ASSERT_TRUE(WriteFile("/lake/scratch", "scratch").ok());
  ASSERT_TRUE(WriteFile("/lake/old.tmp", "rewritten").ok());
  SourceUnreachable(true);
  const uint64_t deletes = faults_->calls(ufs::UfsOp::kDelete);
  ASSERT_TRUE(Rename("/lake/ckpt.tmp", "/lake/ckpt.pt").ok());
  ASSERT_TRUE(Remove("/lake/scratch").ok());
  EXPECT_EQ(faults_->calls(ufs::UfsOp::kDelete), deletes);  // The source was not asked.
  EXPECT_TRUE(Pending("/lake/ckpt.pt"));
  EXPECT_FALSE(Pending("/lake/ckpt.tmp"));
  EXPECT_FALSE(Pending("/lake/scratch"));
  EXPECT_FALSE(Rename("/lake/old.tmp", "/lake/old.pt").ok());
  EXPECT_TRUE(Pending("/lake/old.tmp"));  // Nothing changed.
  SourceUnreachable(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("ckpt.pt"), data);
  EXPECT_EQ(Content("old.tmp"), "rewritten");
  for (const char* gone : {"ckpt.tmp", "scratch", "old.pt"}) {
    EXPECT_FALSE(InSource(gone)) << gone;
  }
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

// After an upload attempt of a new file whose outcome is unknown (a commit whose reply was
// lost), it may be in the source: a rename then deletes the old name in the source first.
TEST_F(WriteBackTest, ARenameAfterAnUploadThatMayHaveLandedDeletesTheOldName) {
  ufs::FaultSpec lost;
  lost.failure_probability = 1.0;
  lost.status = UnavailableError("reply lost").WithOutcomeUnknown();
  faults_->SetFault(ufs::UfsOp::kWrite, lost);
  ASSERT_TRUE(WriteFile("/lake/tried.tmp", "t").ok());
  for (int i = 0; i < 1000 && Metric("cairn_worker_write_back_retries_total") < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_GE(Metric("cairn_worker_write_back_retries_total"), 1);
  EXPECT_FALSE(writes_->write_back()->NeverUploaded("/lake/tried.tmp"));
  const uint64_t deletes = faults_->calls(ufs::UfsOp::kDelete);
  ASSERT_TRUE(Rename("/lake/tried.tmp", "/lake/tried.pt").ok());
  EXPECT_EQ(faults_->calls(ufs::UfsOp::kDelete), deletes + 1);
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("tried.pt"), "t");
}

// Checkpoint rotation through an outage: the uploads of a saved checkpoint and of an old one
// are tried and fail without reaching the source (it cannot be reached: the attempts fail
// unmarked). Nothing of them can be there, so renaming the one and removing the other still
// need no source (before, any attempt counted as a possible landing: both failed until the
// lake was back). Once it is, only the renamed file lands.
TEST_F(WriteBackTest, FilesWhoseUploadsNeverReachedTheSourceAreRenamedAndRemovedWithoutIt) {
  // One attempt each, then none for 2 s: a file whose attempt is running counts as maybe in the
  // source (a flake under ASan, where the fixture's 5 ms retries were often running).
  Start(1ull << 30, std::chrono::milliseconds(0), [](WriteServiceOptions& o) {
    o.write_back.retry_min = o.write_back.retry_max = std::chrono::seconds(2);
  });
  SourceDown(true);  // Uploads fail before they are sent.
  const std::string data = testing::RandomBytes(2 * kPart + 9, 23);
  ASSERT_TRUE(WriteFile("/lake/step-1.pt.tmp", data).ok());
  ASSERT_TRUE(WriteFile("/lake/step-0.pt", "old checkpoint").ok());
  for (int i = 0; i < 2000 && Metric("cairn_worker_write_back_retries_total") < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_GE(Metric("cairn_worker_write_back_retries_total"), 2);  // Both were tried.
  EXPECT_TRUE(writes_->write_back()->NeverUploaded("/lake/step-1.pt.tmp"));
  EXPECT_TRUE(writes_->write_back()->NeverUploaded("/lake/step-0.pt"));
  SourceUnreachable(true);
  const uint64_t deletes = faults_->calls(ufs::UfsOp::kDelete);
  ASSERT_TRUE(Rename("/lake/step-1.pt.tmp", "/lake/step-1.pt").ok());
  ASSERT_TRUE(Remove("/lake/step-0.pt").ok());
  EXPECT_EQ(faults_->calls(ufs::UfsOp::kDelete), deletes);  // The source was not asked.
  EXPECT_TRUE(Pending("/lake/step-1.pt"));
  EXPECT_FALSE(Pending("/lake/step-0.pt"));
  SourceUnreachable(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("step-1.pt"), data);
  EXPECT_FALSE(InSource("step-1.pt.tmp"));
  EXPECT_FALSE(InSource("step-0.pt"));
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

TEST_F(WriteBackTest, ARenameRacingTheUploadEndsTheSame) {
  // Parts go up under the temporary name while it is written; the rename may find the file
  // pending (its upload starts over under the new name) or being uploaded (it waits, then
  // renames in the source): either way one object, under the new name.
  const std::string data = testing::RandomBytes(5 * kPart + 3, 4);
  ASSERT_TRUE(WriteFile("/lake/big.tmp", data).ok());
  ASSERT_TRUE(Rename("/lake/big.tmp", "/lake/big.bin").ok());
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("big.bin"), data);
  EXPECT_FALSE(InSource("big.tmp"));
}

TEST_F(WriteBackTest, AFileRenamedRightAfterItsCloseGoesUpOnceUnderItsNewName) {
  Start(1ull << 30, std::chrono::seconds(30));  // The upload waits for a rename to come.
  const std::string data = testing::RandomBytes(3 * kPart + 1, 13);
  ASSERT_TRUE(WriteFile("/lake/ckpt.pt.tmp", data).ok());
  ASSERT_TRUE(Rename("/lake/ckpt.pt.tmp", "/lake/ckpt.pt").ok());  // Moved, not waited for.
  EXPECT_TRUE(Pending("/lake/ckpt.pt"));
  EXPECT_FALSE(InSource("ckpt.pt"));
  ASSERT_TRUE(SyncAll().ok());  // Starts it at once.
  EXPECT_EQ(Content("ckpt.pt"), data);
  EXPECT_FALSE(InSource("ckpt.pt.tmp"));
  EXPECT_EQ(Metric("cairn_worker_write_back_commits_total"), 1);
  EXPECT_EQ(memory_->OpenUploads(), 0u);  // The parts sent under the old name were aborted.
}

TEST_F(WriteBackTest, ARenameReplacesWhatIsPendingUnderTheNewName) {
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/a.tmp", "renamed").ok());
  ASSERT_TRUE(WriteFile("/lake/a.pt", "closed after, replaced by the rename").ok());
  ASSERT_TRUE(Rename("/lake/a.tmp", "/lake/a.pt").ok());
  ASSERT_TRUE(WriteFile("/lake/b.pt", "closed before").ok());
  ASSERT_TRUE(WriteFile("/lake/b.tmp", "renamed too").ok());
  ASSERT_TRUE(Rename("/lake/b.tmp", "/lake/b.pt").ok());
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("a.pt"), "renamed");
  EXPECT_EQ(Content("b.pt"), "renamed too");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

// A rename replaces what the source holds under the new name when it is done, and only that:
// an object someone else puts there between the rename and the upload (a long outage of the
// uploads, a commit delay) is not overwritten; the renamed file is set aside as a conflict,
// as any write-back file whose name changed under it.
TEST_F(WriteBackTest, ARenamedFileDoesNotOverwriteWhatSomeoneElsePutUnderItsNameSince) {
  memory_->Put("latest.pt", "the checkpoint the rename replaces");
  SourceDown(true);  // Uploads fail; stats work.
  ASSERT_TRUE(WriteFile("/lake/latest.pt.tmp", "step 2").ok());
  ASSERT_TRUE(Rename("/lake/latest.pt.tmp", "/lake/latest.pt").ok());
  ASSERT_TRUE(WriteFile("/lake/best.pt.tmp", "best").ok());
  ASSERT_TRUE(Rename("/lake/best.pt.tmp", "/lake/best.pt").ok());  // Absent when renamed.
  memory_->Put("latest.pt", "another job's checkpoint");           // Written to the bucket.
  memory_->Put("best.pt", "another job's best");
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("latest.pt"), "another job's checkpoint");
  EXPECT_EQ(Content("best.pt"), "another job's best");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 2);
}

// What a rename replaces when files of the new name wait here: what they were opened over,
// known without asking the source (so the checkpoint idiom, saving `latest.pt` through a
// temporary name again and again, works while the lake is unreachable).
TEST_F(WriteBackTest, ARenameOverAWaitingFileReplacesWhatThatFileWasOpenedOver) {
  Start(1ull << 30, std::chrono::seconds(30));  // No upload begins by itself.
  memory_->Put("latest.pt", "step 0");
  ASSERT_TRUE(WriteFile("/lake/latest.pt", "step 1").ok());  // Opened over "step 0".
  ASSERT_TRUE(WriteFile("/lake/latest.pt.tmp", "step 2").ok());
  SourceUnreachable(true);
  const uint64_t stats = faults_->calls(ufs::UfsOp::kStat);
  ASSERT_TRUE(Rename("/lake/latest.pt.tmp", "/lake/latest.pt").ok());
  EXPECT_EQ(faults_->calls(ufs::UfsOp::kStat), stats);  // Not asked.
  SourceUnreachable(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("latest.pt"), "step 2");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
  // Again, with someone else's object put there meanwhile: set aside, not overwritten.
  ASSERT_TRUE(WriteFile("/lake/latest.pt", "step 3").ok());
  ASSERT_TRUE(WriteFile("/lake/latest.pt.tmp", "step 4").ok());
  ASSERT_TRUE(Rename("/lake/latest.pt.tmp", "/lake/latest.pt").ok());
  memory_->Put("latest.pt", "another job's checkpoint");
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("latest.pt"), "another job's checkpoint");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 1);
}

// A file that goes on from one still waiting (a sync's next session; an open of the path)
// expects what that one expects: if someone else changed the object meanwhile and the first
// is set aside, so is the second, rather than replacing the other's object with content that
// came from the first.
TEST_F(WriteBackTest, AFileThatGoesOnFromAWaitingOneIsSetAsideWithIt) {
  memory_->Put("synced.bin", "v0");
  memory_->Put("appended.log", "v0");
  SourceDown(true);
  auto file = Open("/lake/synced.bin");
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(Write(file->handle, 0, "first").ok());
  ASSERT_TRUE(writes_->Serve("team-a", protocol::SyncWriteRequest{0, file->handle}).ok());
  ASSERT_TRUE(WriteFile("/lake/appended.log", "line 1\n").ok());
  memory_->Put("synced.bin", "another job's");  // Written to the bucket directly meanwhile.
  memory_->Put("appended.log", "another job's");
  ASSERT_TRUE(Write(file->handle, 5, " and second").ok());
  ASSERT_TRUE(Close(file->handle).ok());
  auto append = Open("/lake/appended.log", /*truncate=*/false);
  ASSERT_TRUE(append.ok());
  ASSERT_TRUE(Write(append->handle, append->size, "line 2\n").ok());
  ASSERT_TRUE(Close(append->handle).ok());
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("synced.bin"), "another job's");
  EXPECT_EQ(Content("appended.log"), "another job's");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 4);
}

// Commits of a path move the condition of its later files on (AdoptCommit) in the journal
// too: after a crash such a file still replaces the version before it, instead of expecting
// the one it was closed over and being set aside.
TEST(WriteBackJournalTest, ANewConditionOfAWaitingFileSurvivesARestart) {
  testing::TempDir dir{"adopt"};
  WriteBackOptions options;
  options.journal_path = (dir.path() / "journal").string();
  {
    auto queue = WriteBack::Open(options);
    ASSERT_TRUE(queue.ok()) << queue.status().ToString();
    for (int i = 0; i < 2; ++i) {
      PendingWrite write;
      write.record.path = "/lake/log";
      write.record.spool_path = (dir.path() / ("spool-" + std::to_string(i))).string();
      write.record.size = 1;
      write.record.condition = ufs::WriteCondition::Version("v0");
      ASSERT_TRUE((*queue)->Add(write).ok());
    }
    (*queue)->AdoptCommit("/lake/log", "v1");  // Not started: nothing uploads; then it goes.
  }
  std::vector<write::JournalRecord> replayed;
  auto journal = write::WriteJournal::Open(options.journal_path, &replayed);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(replayed.size(), 2u);
  for (const auto& record : replayed) {
    EXPECT_EQ(record.condition, ufs::WriteCondition::Version("v1")) << record.id;
  }
}

// A rename's delete journals "whatever is there" (None) for the name's waiting files, then
// their new condition once the object is gone: journaled also for a file that expected it in
// memory already (one closed as new: Absent), or a crash after the rename replayed None for
// it, an upload over whatever someone put there meanwhile.
TEST(WriteBackJournalTest, AConditionSetAfterAJournaledOneIsJournaledEvenIfUnchangedInMemory) {
  testing::TempDir dir{"rejournal"};
  WriteBackOptions options;
  options.journal_path = (dir.path() / "journal").string();
  {
    auto queue = WriteBack::Open(options);
    ASSERT_TRUE(queue.ok()) << queue.status().ToString();
    PendingWrite write;
    write.record.path = "/lake/ckpt";
    write.record.spool_path = (dir.path() / "spool-0").string();
    write.record.size = 1;
    write.record.condition = ufs::WriteCondition::Absent();
    ASSERT_TRUE((*queue)->Add(write).ok());
    ASSERT_TRUE((*queue)->JournalCondition("/lake/ckpt", ufs::WriteCondition::None()).ok());
    ASSERT_TRUE((*queue)->SetCondition("/lake/ckpt", ufs::WriteCondition::Absent()).ok());
  }
  std::vector<write::JournalRecord> replayed;
  auto journal = write::WriteJournal::Open(options.journal_path, &replayed);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(replayed.size(), 1u);
  EXPECT_EQ(replayed[0].condition, ufs::WriteCondition::Absent());
}

// Add refuses at once without room: its caller holds the closed file's lock, which the upload
// that would make room needs (it adopts its version into the path's open files), so a wait in
// Add could only end at its timeout (a close whose room went to another file during its seal
// failed with ENOSPC after full_wait, the upload stuck behind it). The close waits for room
// in WaitForRoom, without that lock.
TEST(WriteBackJournalTest, AnAddWithoutRoomIsRefusedAtOnce) {
  testing::TempDir dir{"no-room"};
  WriteBackOptions options;
  options.journal_path = (dir.path() / "journal").string();
  options.max_pending_files = 1;
  options.full_wait = std::chrono::seconds(30);
  auto queue = WriteBack::Open(options);
  ASSERT_TRUE(queue.ok()) << queue.status().ToString();
  for (int i = 0; i < 2; ++i) {
    PendingWrite write;
    write.record.path = "/lake/f" + std::to_string(i);
    write.record.spool_path = (dir.path() / ("spool-" + std::to_string(i))).string();
    write.record.size = 1;
    const auto began = std::chrono::steady_clock::now();
    StatusOr<uint64_t> added = (*queue)->Add(write);
    if (i == 0) {
      ASSERT_TRUE(added.ok()) << added.status().ToString();
      continue;
    }
    EXPECT_EQ(added.status().code(), StatusCode::kResourceExhausted);
    EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10));
  }
}

// A remove of a file an upload thread has picked (it waits for the commit lock the remove
// holds) is journaled at once, not when that thread comes back: a crash in between replayed,
// and uploaded, a removed file; and one whose attempt failed before it saw the removal stayed
// in the journal through a clean stop too.
TEST(WriteBackJournalTest, ARemoveOfAFileBeingUploadedIsJournaledAtOnce) {
  testing::TempDir dir{"cancel"};
  WriteBackOptions options;
  options.journal_path = (dir.path() / "journal").string();
  options.retry_min = std::chrono::seconds(60);  // No second attempt in this test.
  options.commit_delay = std::chrono::milliseconds(0);
  auto queue = WriteBack::Open(options);
  ASSERT_TRUE(queue.ok()) << queue.status().ToString();
  PendingWrite write;
  write.record.path = "/lake/x";
  write.record.spool_path = (dir.path() / "spool-x").string();
  write.record.size = 1;
  ASSERT_TRUE((*queue)->Add(write).ok());
  std::promise<void> picked;
  std::promise<void> go_on;
  std::shared_future<void> go = go_on.get_future().share();
  (*queue)->Start([&](PendingWrite&) {
    picked.set_value();
    go.wait();  // Where the commit function waits for the remove's commit lock.
    return CommitResult{CommitResult::Outcome::kRetry, "the mount table is loading"};
  });
  picked.get_future().wait();
  ASSERT_TRUE((*queue)->CancelPath("/lake/x").ok());
  // What a crash now would replay (a copy: the live journal stays untouched).
  const std::string copy = (dir.path() / "journal-copy").string();
  std::filesystem::copy_file(options.journal_path, copy);
  std::vector<write::JournalRecord> replayed;
  ASSERT_TRUE(write::WriteJournal::Open(copy, &replayed).ok());
  EXPECT_TRUE(replayed.empty()) << replayed.size() << " file(s) would be uploaded again";
  go_on.set_value();
  queue->reset();  // A clean stop keeps what is pending: the removed file is not.
  ASSERT_TRUE(write::WriteJournal::Open(options.journal_path, &replayed).ok());
  EXPECT_TRUE(replayed.empty());
}

// The journal lives in the first cache folder's spool folder; the cache folders given in
// another order at the next start must not start a new, empty journal there (which swept every
// waiting file's spool file as unknown). Journals that name nothing are as good as none (an
// older configuration leaves one behind); two that name waiting files are refused, not guessed
// between.
TEST(WriteBackJournalTest, TheJournalIsFoundInWhicheverSpoolFolderNamesWaitingFiles) {
  testing::TempDir dir{"choose"};
  const std::string a = (dir.path() / "a").string();
  const std::string b = (dir.path() / "b").string();
  std::filesystem::create_directories(a);
  std::filesystem::create_directories(b);
  auto journal_with = [](const std::string& path, bool pending) {
    std::vector<write::JournalRecord> replayed;
    auto journal = write::WriteJournal::Open(path, &replayed);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    write::JournalRecord record;
    record.type = write::JournalRecord::Type::kPending;
    record.id = 1;
    record.path = "/lake/x";
    record.spool_path = path + ".spool";
    ASSERT_TRUE((*journal)->Append(record).ok());
    if (!pending) {
      record.type = write::JournalRecord::Type::kDone;
      ASSERT_TRUE((*journal)->Append(record).ok());
    }
  };
  EXPECT_EQ(ChooseJournalPath({a, b}).value(), a + "/journal");  // None yet: the first.
  journal_with(b + "/journal", /*pending=*/true);
  EXPECT_EQ(ChooseJournalPath({a, b}).value(), b + "/journal");
  journal_with(a + "/journal", /*pending=*/false);  // Names nothing any more.
  EXPECT_EQ(ChooseJournalPath({a, b}).value(), b + "/journal");
  std::filesystem::remove(a + "/journal");
  journal_with(a + "/journal", /*pending=*/true);
  const Status both = ChooseJournalPath({a, b}).status();
  EXPECT_EQ(both.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(both.message().find(b + "/journal"), std::string::npos) << both.ToString();
  // Neither names anything: the first there is goes on (its spool set stamps the folders).
  for (const std::string& folder : {a, b}) {
    std::filesystem::remove(folder + "/journal");
    journal_with(folder + "/journal", /*pending=*/false);
  }
  EXPECT_EQ(ChooseJournalPath({b, a}).value(), b + "/journal");
  EXPECT_EQ(ChooseJournalPath({a, b}).value(), a + "/journal");
  std::filesystem::remove(a + "/journal");
  EXPECT_EQ(ChooseJournalPath({a, b}).value(), b + "/journal");
  EXPECT_FALSE(ChooseJournalPath({}).ok());
}

TEST_F(WriteBackTest, ARenameOntoItselfIsRefusedAndChangesNothing) {
  memory_->Put("same.pt", "an older upload");
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/same.pt", "weights").ok());
  EXPECT_EQ(Rename("/lake/same.pt", "/lake/same.pt").code(), StatusCode::kInvalidArgument);
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("same.pt"), "weights");
  EXPECT_EQ(Metric("cairn_worker_write_back_conflicts_total"), 0);
}

TEST_F(WriteBackTest, ANoReplaceRenameOfAPendingFileNeedsTheNameFree) {
  memory_->Put("taken", "in the source");
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/x.tmp", "x").ok());
  ASSERT_TRUE(WriteFile("/lake/pending", "p").ok());
  EXPECT_EQ(Rename("/lake/x.tmp", "/lake/taken", true).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Rename("/lake/x.tmp", "/lake/pending", true).code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(Pending("/lake/x.tmp"));  // Nothing changed.
  ASSERT_TRUE(Rename("/lake/x.tmp", "/lake/free", true).ok());
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  EXPECT_EQ(Content("free"), "x");
  EXPECT_EQ(Content("taken"), "in the source");
}

TEST_F(WriteBackTest, AnUploadTheLastProcessLeftIsAbortedAtTheNextStart) {
  // A writer of a process that died: its part is in the store, under its token.
  ufs::WriterOptions wo;
  wo.part_size = kPart;
  auto orphan = memory_->StartWrite("orphan.bin", wo);
  ASSERT_TRUE(orphan.ok());
  const std::string part = testing::RandomBytes(kPart, 11);
  ASSERT_TRUE((*orphan)->WritePart(0, part).ok());
  const std::string token = (*orphan)->UploadToken();
  ASSERT_FALSE(token.empty());
  writes_.reset();
  {
    std::vector<write::JournalRecord> pending;
    auto journal = write::WriteJournal::Open((dir_.path() / "journal").string(), &pending);
    ASSERT_TRUE(journal.ok());
    write::JournalRecord upload;
    upload.type = write::JournalRecord::Type::kUpload;
    upload.id = (*journal)->max_id_at_open() + 1;
    upload.path = "/lake/orphan.bin";
    upload.detail = token;
    ASSERT_TRUE((*journal)->Append(upload).ok());
  }
  EXPECT_EQ(memory_->OpenUploads(), 1u);
  Start();
  EXPECT_TRUE(testing::WaitUntil([&] { return memory_->OpenUploads() == 0; }));
  EXPECT_FALSE((*orphan)->Commit(kPart + 1, "x").ok());  // Its part is gone.
  EXPECT_FALSE(InSource("orphan.bin"));
  EXPECT_TRUE(testing::WaitUntil([&] { return writes_->write_back()->LeftoverUploads().empty(); }));
  writes_.reset();  // Done with: not tried again.
  Start();
  EXPECT_TRUE(writes_->write_back()->LeftoverUploads().empty());
}

TEST_F(WriteBackTest, TheUploadsOfCommittedFilesLeaveNothingForTheNextStart) {
  const std::string data = testing::RandomBytes(5 * kPart + 9, 12);  // Parts go up early.
  ASSERT_TRUE(WriteFile("/lake/parts.bin", data).ok());
  auto aborted = Open("/lake/aborted.bin");
  ASSERT_TRUE(aborted.ok());
  ASSERT_TRUE(Write(aborted->handle, 0, data).ok());
  ASSERT_TRUE(SyncAll().ok());
  ASSERT_TRUE(writes_->Serve("team-a", protocol::AbortWriteRequest{0, aborted->handle}).ok());
  EXPECT_EQ(Content("parts.bin"), data);
  EXPECT_EQ(memory_->OpenUploads(), 0u);
  writes_.reset();
  Start();
  EXPECT_TRUE(writes_->write_back()->LeftoverUploads().empty());
}

TEST(PathUnderTest, PrefixesAreWholeComponents) {
  EXPECT_TRUE(PathUnder("/data/a", "/"));
  EXPECT_TRUE(PathUnder("/data/a", "/data"));
  EXPECT_TRUE(PathUnder("/data", "/data"));
  EXPECT_FALSE(PathUnder("/data2/a", "/data"));
  EXPECT_FALSE(PathUnder("/dat", "/data"));
}

}  // namespace
}  // namespace cairn::worker
