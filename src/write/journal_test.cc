// WriteJournal: replay, torn tails, damage, compaction, and the record codec on bad input.
#include "write/journal.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "testing/test_util.h"
#include "ufs/part_layout.h"

namespace cairn::write {
namespace {

using cairn::testing::TempDir;

JournalRecord Pending(uint64_t id, const std::string& path) {
  JournalRecord r;
  r.type = JournalRecord::Type::kPending;
  r.id = id;
  r.path = path;
  r.principal = "team-a";
  r.spool_path = "/spool/write-" + std::to_string(id);
  r.size = id * 1000;
  r.condition = ufs::WriteCondition::Version("etag-" + std::to_string(id));
  r.closed_at_ms = 1'700'000'000'000 + static_cast<int64_t>(id);
  return r;
}

JournalRecord Done(uint64_t id) {
  JournalRecord r;
  r.type = JournalRecord::Type::kDone;
  r.id = id;
  r.outcome = JournalRecord::Outcome::kCommitted;
  r.detail = "v" + std::to_string(id);
  return r;
}

JournalRecord Renamed(uint64_t id, const std::string& path) {
  JournalRecord r;
  r.type = JournalRecord::Type::kRenamed;
  r.id = id;
  r.path = path;
  r.condition = ufs::WriteCondition::Absent();
  return r;
}

// One run of a process: opens the journal at `path` (made if need be) and appends `records`.
void AppendAll(const std::string& path, const std::vector<JournalRecord>& records) {
  std::vector<JournalRecord> replayed;
  auto journal = WriteJournal::Open(path, &replayed);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  for (const JournalRecord& r : records) ASSERT_TRUE((*journal)->Append(r).ok()) << r.id;
}

void AppendRaw(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

JournalRecord Upload(uint64_t id, const std::string& path, const std::string& token) {
  JournalRecord r;
  r.type = JournalRecord::Type::kUpload;
  r.id = id;
  r.path = path;
  r.detail = token;
  return r;
}

JournalRecord Ended(uint64_t id) {
  JournalRecord r = Done(id);
  r.outcome = JournalRecord::Outcome::kEnded;
  r.detail.clear();
  return r;
}

TEST(JournalRecordTest, RoundTripsEveryKind) {
  for (const JournalRecord& r :
       {Pending(7, "/lake/a b/ckpt.pt"), Done(7), Renamed(7, "/lake/final.pt"),
        Upload(8, "/lake/big.bin", "upload-id-2~x"), Ended(8)}) {
    StatusOr<JournalRecord> back = DecodeJournalRecord(EncodeJournalRecord(r));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, r);
  }
  JournalRecord absent = Pending(8, "/x");
  absent.condition = ufs::WriteCondition::Absent();
  EXPECT_EQ(*DecodeJournalRecord(EncodeJournalRecord(absent)), absent);
}

// A pending record with its spool file's digest is type 5; one without stays type 1, as
// journals from before digests have it.
TEST(JournalRecordTest, APendingRecordCarriesItsSpoolDigest) {
  JournalRecord checked = Pending(9, "/lake/ckpt.pt");
  checked.digest_part_size = 8 << 20;
  checked.digest = 0x0123456789abcdefULL;
  const std::string bytes = EncodeJournalRecord(checked);
  EXPECT_EQ(bytes[0], 5);
  EXPECT_EQ(*DecodeJournalRecord(bytes), checked);
  EXPECT_EQ(EncodeJournalRecord(Pending(9, "/lake/ckpt.pt"))[0], 1);
  std::string no_part_size = bytes;
  std::fill(no_part_size.end() - 16, no_part_size.end() - 8, '\0');
  EXPECT_EQ(DecodeJournalRecord(no_part_size).status().code(), StatusCode::kCorruption);
}

// What no writer makes is damage, refused at the start, not a file retried for ever (a part
// size no session takes) nor sizes that wrap the queue's byte count when summed.
TEST(JournalRecordTest, APartSizeOrFileSizeNoWriterMakesIsCorruption) {
  JournalRecord record = Pending(4, "/lake/ckpt.pt");
  record.digest = 7;
  record.digest_part_size = ufs::PartLayout::kMaxBase;
  EXPECT_TRUE(DecodeJournalRecord(EncodeJournalRecord(record)).ok());
  record.digest_part_size = ufs::PartLayout::kMaxBase + 1;
  EXPECT_EQ(DecodeJournalRecord(EncodeJournalRecord(record)).status().code(),
            StatusCode::kCorruption);
  record.digest_part_size = 8 << 20;
  record.size = JournalRecord::kMaxFileBytes;
  EXPECT_TRUE(DecodeJournalRecord(EncodeJournalRecord(record)).ok());
  record.size = ~uint64_t{0};
  EXPECT_EQ(DecodeJournalRecord(EncodeJournalRecord(record)).status().code(),
            StatusCode::kCorruption);
}

TEST(JournalRecordTest, EveryTruncationOrTrailingByteIsCorruption) {
  JournalRecord checked = Pending(3, "/lake/f");
  checked.digest_part_size = 64 << 10;
  checked.digest = 42;
  for (const std::string& bytes :
       {EncodeJournalRecord(Pending(3, "/lake/f")), EncodeJournalRecord(checked)}) {
    for (size_t n = 0; n < bytes.size(); ++n) {
      EXPECT_EQ(DecodeJournalRecord(bytes.substr(0, n)).status().code(), StatusCode::kCorruption)
          << n;
    }
    EXPECT_EQ(DecodeJournalRecord(bytes + "x").status().code(), StatusCode::kCorruption);
  }
  const std::string full = EncodeJournalRecord(Pending(3, "/lake/f"));
  std::string bad_type = full;
  bad_type[0] = 9;
  EXPECT_EQ(DecodeJournalRecord(bad_type).status().code(), StatusCode::kCorruption);
  std::string huge_string = full;
  huge_string[9] = '\xff';  // The path's length: far past the payload.
  huge_string[10] = '\xff';
  EXPECT_EQ(DecodeJournalRecord(huge_string).status().code(), StatusCode::kCorruption);
}

TEST(WriteJournalTest, ReplaysThePendingRecordsInOrder) {
  TempDir dir;
  const std::string path = dir.str() + "/journal";
  std::vector<JournalRecord> pending;
  {
    auto journal = WriteJournal::Open(path, &pending);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    EXPECT_TRUE(pending.empty());
    for (uint64_t id = 1; id <= 4; ++id) {
      JournalRecord r = Pending(id, "/lake/f" + std::to_string(id));
      if (id == 3) r.digest_part_size = 8 << 20, r.digest = 77;  // Type 5 replays alike.
      ASSERT_TRUE((*journal)->Append(r).ok());
    }
    ASSERT_TRUE((*journal)->Append(Done(2)).ok());
    ASSERT_TRUE((*journal)->Append(Done(4)).ok());
    EXPECT_EQ((*journal)->live_records(), 2u);
    EXPECT_EQ((*journal)->Append(Pending(1, "/again")).code(), StatusCode::kInvalidArgument);
  }
  auto journal = WriteJournal::Open(path, &pending);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  EXPECT_EQ((*journal)->max_id_at_open(), 4u);  // Finished records count: new ids go past them.
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0], Pending(1, "/lake/f1"));
  JournalRecord third = Pending(3, "/lake/f3");
  third.digest_part_size = 8 << 20;
  third.digest = 77;
  EXPECT_EQ(pending[1], third);
}

TEST(WriteJournalTest, ATornTailIsCutAndTheJournalGoesOn) {
  TempDir dir;
  const std::string path = dir.str() + "/journal";
  std::vector<JournalRecord> pending;
  {
    auto journal = WriteJournal::Open(path, &pending);
    ASSERT_TRUE(journal.ok());
    ASSERT_TRUE((*journal)->Append(Pending(1, "/lake/a")).ok());
  }
  const auto good_size = std::filesystem::file_size(path);
  // Half a frame (a crash in the middle of an append), then, in a second run, zeros (a file
  // system showing a crashed append's blocks as zeros).
  for (const std::string& tail :
       {std::string("\x40\x00\x00\x00\x12\x34", 6), std::string(300, '\0')}) {
    AppendRaw(path, tail);
    auto journal = WriteJournal::Open(path, &pending);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    ASSERT_EQ(pending.size(), 1u);
    EXPECT_EQ(std::filesystem::file_size(path), good_size);
  }
  auto journal = WriteJournal::Open(path, &pending);
  ASSERT_TRUE(journal.ok());
  ASSERT_TRUE((*journal)->Append(Pending(2, "/lake/b")).ok());
  journal->reset();
  ASSERT_TRUE(WriteJournal::Open(path, &pending).ok());
  EXPECT_EQ(pending.size(), 2u);
}

TEST(WriteJournalTest, DamageBeforeGoodRecordsStopsTheReplay) {
  TempDir dir;
  const std::string path = dir.str() + "/journal";
  std::vector<JournalRecord> pending;
  {
    auto journal = WriteJournal::Open(path, &pending);
    ASSERT_TRUE(journal.ok());
    ASSERT_TRUE((*journal)->Append(Pending(1, "/lake/a")).ok());
    ASSERT_TRUE((*journal)->Append(Pending(2, "/lake/b")).ok());
  }
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(8 + 12 + 5);  // Inside the first record's payload.
    f.put('#');
  }
  auto journal = WriteJournal::Open(path, &pending);
  EXPECT_EQ(journal.status().code(), StatusCode::kCorruption);
  EXPECT_NE(journal.status().message().find("damaged"), std::string::npos);
}

TEST(WriteJournalTest, AFileThatIsNotAJournalIsRefused) {
  TempDir dir;
  const std::string path = dir.str() + "/journal";
  AppendRaw(path, "hello, world");
  std::vector<JournalRecord> pending;
  EXPECT_EQ(WriteJournal::Open(path, &pending).status().code(), StatusCode::kCorruption);
  for (const char* not_ours : {"CAIRNWJ2", "CAIRNWX", "XAIRNWJ1"}) {
    std::filesystem::remove(path);
    AppendRaw(path, not_ours);
    EXPECT_EQ(WriteJournal::Open(path, &pending).status().code(), StatusCode::kCorruption)
        << not_ours;
  }
}

// A power loss while a journal was being made leaves part of its magic (or zeros where the file
// system had not written it yet); no record can follow, so the journal is made anew, where
// refusing it would keep the worker from starting until someone deleted the file.
TEST(WriteJournalTest, AJournalTornWhileItWasMadeIsMadeAnew) {
  const std::string magic = "CAIRNWJ1";
  std::vector<std::string> torn;
  for (size_t n = 1; n < magic.size(); ++n) torn.push_back(magic.substr(0, n));
  torn.push_back(std::string(8, '\0'));
  torn.push_back(magic.substr(0, 3) + std::string(5, '\0'));
  for (const std::string& start : torn) {
    TempDir dir;
    const std::string path = dir.str() + "/journal";
    AppendRaw(path, start);
    AppendAll(path, {Pending(1, "/lake/a")});
    std::vector<JournalRecord> pending;
    auto journal = WriteJournal::Open(path, &pending);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    ASSERT_EQ(pending.size(), 1u) << start.size();
    EXPECT_EQ(pending[0], Pending(1, "/lake/a"));
  }
}

TEST(WriteJournalTest, ARenamedFileReplaysUnderItsNewPathAndCondition) {
  TempDir dir;
  const std::string path = dir.str() + "/journal";
  std::vector<JournalRecord> pending;
  {
    auto journal = WriteJournal::Open(path, &pending);
    ASSERT_TRUE(journal.ok());
    ASSERT_TRUE((*journal)->Append(Pending(1, "/lake/ckpt.tmp")).ok());
    ASSERT_TRUE((*journal)->Append(Pending(2, "/lake/other.tmp")).ok());
    ASSERT_TRUE((*journal)->Append(Renamed(1, "/lake/ckpt.pt")).ok());
    ASSERT_TRUE((*journal)->Append(Renamed(2, "/lake/x")).ok());
    ASSERT_TRUE((*journal)->Append(Done(2)).ok());
    // Only a pending file can be renamed.
    EXPECT_EQ((*journal)->Append(Renamed(2, "/lake/y")).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ((*journal)->Append(Renamed(9, "/lake/y")).code(), StatusCode::kInvalidArgument);
    ASSERT_TRUE((*journal)->Compact().ok());  // The live record carries the new path.
    ASSERT_TRUE((*journal)->Append(Pending(3, "/lake/b")).ok());
    ASSERT_TRUE((*journal)->Append(Renamed(3, "/lake/c")).ok());
  }
  auto journal = WriteJournal::Open(path, &pending);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(pending.size(), 2u);
  JournalRecord expected = Pending(1, "/lake/ckpt.pt");
  expected.condition = ufs::WriteCondition::Absent();
  EXPECT_EQ(pending[0], expected);
  EXPECT_EQ(pending[1].path, "/lake/c");
  EXPECT_EQ(pending[1].spool_path, Pending(3, "").spool_path);
}

// A rename replaces the other waiting files of both names (WriteBack::Retarget journals their
// kDone records after the rename's). A crash between those appends, or a compaction between
// them, must not bring a replaced file back: replayed after the renamed one, a replaced file of
// the new name would land last and undo the rename (and an older file of the old name would
// reappear there). A later close of either name, and a condition change (same path), stay.
TEST(WriteJournalTest, ARenameDropsTheFilesItReplacesEvenBeforeTheirDoneRecords) {
  TempDir dir;
  const std::string path = dir.str() + "/journal";
  std::vector<JournalRecord> pending;
  for (bool compact : {false, true}) {
    std::filesystem::remove(path);
    {
      auto journal = WriteJournal::Open(path, &pending);
      ASSERT_TRUE(journal.ok());
      ASSERT_TRUE((*journal)->Append(Pending(1, "/lake/ckpt.tmp")).ok());  // Older, replaced.
      ASSERT_TRUE((*journal)->Append(Pending(2, "/lake/ckpt.tmp")).ok());  // Renamed.
      ASSERT_TRUE((*journal)->Append(Pending(3, "/lake/ckpt.pt")).ok());   // Replaced.
      ASSERT_TRUE((*journal)->Append(Pending(4, "/lake/other")).ok());
      ASSERT_TRUE((*journal)->Append(Renamed(4, "/lake/other")).ok());  // A condition change.
      ASSERT_TRUE((*journal)->Append(Renamed(2, "/lake/ckpt.pt")).ok());
      EXPECT_EQ((*journal)->live_records(), 2u);
      if (compact) {
        ASSERT_TRUE((*journal)->Compact().ok());
      }
      ASSERT_TRUE((*journal)->Append(Pending(5, "/lake/ckpt.pt")).ok());  // A close after.
      // The process dies here, before the kDone records of 1 and 3.
    }
    auto journal = WriteJournal::Open(path, &pending);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    std::vector<std::pair<uint64_t, std::string>> got;
    for (const JournalRecord& r : pending) got.emplace_back(r.id, r.path);
    const std::vector<std::pair<uint64_t, std::string>> want = {
        {2, "/lake/ckpt.pt"}, {4, "/lake/other"}, {5, "/lake/ckpt.pt"}};
    EXPECT_EQ(got, want) << "compacted: " << compact;
  }
}

// Only the end of the file can be torn, and only by what an append writes: a damaged length
// in the middle (which would make the frame run past the end) and a whole, checksummed last
// record this version cannot read are damage, not a torn end: the journal is refused, not cut.
TEST(WriteJournalTest, OnlyWhatACrashedAppendLeavesIsCutAsATornEnd) {
  TempDir dir;
  const std::string path = dir.str() + "/journal";
  std::vector<JournalRecord> pending;
  AppendAll(path, {Pending(1, "/lake/a"), Pending(2, "/lake/b")});
  const auto size = std::filesystem::file_size(path);
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(8 + 3);  // The high byte of the first record's length: far past the end now.
    f.put('\x40');
  }
  auto damaged = WriteJournal::Open(path, &pending);
  EXPECT_EQ(damaged.status().code(), StatusCode::kCorruption) << damaged.status().ToString();
  EXPECT_EQ(std::filesystem::file_size(path), size) << "nothing was cut";

  // A last record whose frame is whole and checksummed but whose type is unknown.
  std::filesystem::remove(path);
  AppendAll(path, {Pending(1, "/lake/a")});
  const auto good_size = std::filesystem::file_size(path);
  std::string payload = EncodeJournalRecord(Done(1));
  payload[0] = 99;  // The record type.
  AppendRaw(path, FrameJournalPayload(payload));
  auto unknown = WriteJournal::Open(path, &pending);
  EXPECT_EQ(unknown.status().code(), StatusCode::kCorruption) << unknown.status().ToString();
  EXPECT_GT(std::filesystem::file_size(path), good_size) << "nothing was cut";
}

TEST(WriteJournalTest, UploadsBegunAndNotEndedAreReplayedWithThePendingFiles) {
  TempDir dir;
  const std::string path = dir.str() + "/journal";
  std::vector<JournalRecord> pending;
  {
    auto journal = WriteJournal::Open(path, &pending);
    ASSERT_TRUE(journal.ok());
    ASSERT_TRUE((*journal)->Append(Upload(1, "/lake/a", "t1")).ok());
    ASSERT_TRUE((*journal)->Append(Pending(2, "/lake/b")).ok());
    ASSERT_TRUE((*journal)->Append(Upload(3, "/lake/c", "t3")).ok());
    ASSERT_TRUE((*journal)->Append(Ended(1)).ok());
    // A rename names pending files only.
    EXPECT_EQ((*journal)->Append(Renamed(9, "/lake/x")).code(), StatusCode::kInvalidArgument);
  }
  auto journal = WriteJournal::Open(path, &pending);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0], Pending(2, "/lake/b"));
  EXPECT_EQ(pending[1], Upload(3, "/lake/c", "t3"));
  EXPECT_EQ(DecodeJournalRecord(EncodeJournalRecord(Upload(4, "/lake/d", ""))).status().code(),
            StatusCode::kCorruption);  // An upload without a token is no record.
}

TEST(WriteJournalTest, CompactsOnceMostlyDead) {
  TempDir dir;
  const std::string path = dir.str() + "/journal";
  std::vector<JournalRecord> pending;
  auto journal = WriteJournal::Open(path, &pending);
  ASSERT_TRUE(journal.ok());
  ASSERT_TRUE((*journal)->Append(Pending(1, "/lake/kept")).ok());
  const std::string long_path = "/lake/" + std::string(8000, 'p');
  uint64_t peak = 0;
  for (uint64_t id = 2; id < 800; ++id) {
    ASSERT_TRUE((*journal)->Append(Pending(id, long_path)).ok());
    ASSERT_TRUE((*journal)->Append(Done(id)).ok());
    peak = std::max(peak, (*journal)->bytes());
  }
  EXPECT_LE(peak, WriteJournal::kCompactBytes + 32768);
  EXPECT_LT(std::filesystem::file_size(path), WriteJournal::kCompactBytes);
  journal->reset();
  ASSERT_TRUE(WriteJournal::Open(path, &pending).ok());
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].path, "/lake/kept");
}

}  // namespace
}  // namespace cairn::write
