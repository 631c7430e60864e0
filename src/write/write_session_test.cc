// WriteSession against the in-memory store, with decorators to count what reaches the source,
// fail uploads, and hold them in flight.
#include "write/write_session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "testing/gate.h"
#include "testing/gated_ufs.h"
#include "testing/test_util.h"
#include "ufs/counting_ufs.h"
#include "ufs/fault_injecting_ufs.h"
#include "ufs/memory_ufs.h"

namespace cairn::write {
namespace {

using cairn::testing::Gate;
using cairn::testing::GatedUnderStorage;
using cairn::testing::TempDir;
using cairn::testing::WaitUntil;

constexpr uint64_t kPart = 64 << 10;

std::span<const char> Span(const std::string& s) { return {s.data(), s.size()}; }

void PutFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

std::string FileContent(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string Pattern(uint64_t n, int seed) {
  std::string out(n, '\0');
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<char>('a' + (seed + i * 31 + i / 997) % 26);
  return out;
}

class WriteSessionTest : public ::testing::Test {
 protected:
  WriteSessionTest()
      : memory_(std::make_shared<ufs::MemoryUnderStorage>()),
        faults_(std::make_shared<ufs::FaultInjectingUnderStorage>(memory_, /*seed=*/1)),
        counting_(std::make_shared<ufs::CountingUnderStorage>(faults_)),
        gated_(std::make_shared<GatedUnderStorage>(counting_)),
        pool_(4, "uploads") {}

  std::unique_ptr<WriteSession> Open(const std::string& key, WriteSessionOptions options = {}) {
    options.part_size = kPart;
    auto session = WriteSession::Create(gated_, key, spool_.str(), options, &pool_);
    EXPECT_TRUE(session.ok()) << session.status().ToString();
    return session.ok() ? std::move(session).value() : nullptr;
  }

  // Writes `content` in `chunk`-byte pieces from the start.
  void WriteSequentially(WriteSession& s, const std::string& content, size_t chunk) {
    for (size_t off = 0; off < content.size(); off += chunk) {
      size_t n = std::min(chunk, content.size() - off);
      ASSERT_TRUE(s.Write(off, Span(content).subspan(off, n)).ok());
    }
  }

  std::string Stored(const std::string& key) { return memory_->Get(key).value_or("<absent>"); }

  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<ufs::FaultInjectingUnderStorage> faults_;
  std::shared_ptr<ufs::CountingUnderStorage> counting_;
  std::shared_ptr<GatedUnderStorage> gated_;
  TempDir spool_{"spool"};
  ThreadPool pool_;
};

TEST_F(WriteSessionTest, FullPartsGoUpWhileWritingAndNothingIsVisibleBeforeCommit) {
  const std::string content = Pattern(5 * kPart + 1234, 1);
  auto s = Open("ckpt/step-100.pt");
  ASSERT_NE(s, nullptr);
  WriteSequentially(*s, content, 10000);
  ASSERT_TRUE(WaitUntil([&] { return s->stats().parts_sent_early == 5; }))
      << "sent early: " << s->stats().parts_sent_early;
  EXPECT_FALSE(memory_->Get("ckpt/step-100.pt").has_value());
  auto info = s->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, content.size());
  EXPECT_EQ(Stored("ckpt/step-100.pt"), content);
  WriteSessionStats stats = s->stats();
  EXPECT_EQ(stats.parts_sent, 5u) << "each full part once; the final part with the commit";
  EXPECT_EQ(stats.parts_resent, 0u);
  EXPECT_EQ(counting_->counts().bytes_written, content.size()) << "no byte sent twice";
}

// Write-back sessions: nothing goes up while the file is written; Commit sends every part.
TEST_F(WriteSessionTest, WithoutEarlyUploadsEverythingGoesUpAtCommit) {
  const std::string content = Pattern(5 * kPart + 99, 2);
  WriteSessionOptions options;
  options.upload_early = false;
  auto s = Open("ckpt/back.pt", options);
  ASSERT_NE(s, nullptr);
  WriteSequentially(*s, content, 10000);
  EXPECT_EQ(s->stats().parts_sent, 0u);
  auto info = s->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Stored("ckpt/back.pt"), content);
  EXPECT_EQ(s->stats().parts_sent_early, 0u);  // Counted at submit: no race with Commit.
  EXPECT_EQ(s->stats().parts_sent, 5u);
  EXPECT_EQ(counting_->counts().bytes_written, content.size());
}

// A file no longer than whole_put_bytes at Commit sends nothing early and goes up in one
// request, however many parts the layout cuts it into.
TEST_F(WriteSessionTest, AFileThatEndsSmallGoesUpInOneRequest) {
  for (uint64_t size : {2 * kPart + 500, 3 * kPart}) {
    const std::string key = "ckpt/small-" + std::to_string(size);
    const std::string content = Pattern(size, 3);
    WriteSessionOptions options;
    options.whole_put_bytes = 3 * kPart;
    auto s = Open(key, options);
    ASSERT_NE(s, nullptr);
    const ufs::UfsCounts before = counting_->counts();
    WriteSequentially(*s, content, 10000);
    EXPECT_EQ(memory_->OpenUploads(), 0u) << "no part went to the pool, so no upload began";
    auto info = s->Commit();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(Stored(key), content);
    const WriteSessionStats stats = s->stats();
    EXPECT_EQ(stats.parts_sent, 0u);
    EXPECT_EQ(stats.whole_puts, 1u);
    EXPECT_EQ(counting_->counts().writes - before.writes, 1u);
    EXPECT_EQ(counting_->counts().bytes_written - before.bytes_written, content.size());
    EXPECT_EQ(memory_->OpenUploads(), 0u);
  }
}

// Past whole_put_bytes the parts written so far go up at once, and the rest as they fill; a
// file that grew past it and shrank below it again starts over and goes up in one request.
TEST_F(WriteSessionTest, AFileThatGrowsPastTheWholePutSizeSendsItsPartsEarly) {
  WriteSessionOptions options;
  options.whole_put_bytes = 2 * kPart;
  const std::string content = Pattern(5 * kPart + 1234, 4);
  auto s = Open("ckpt/large.pt", options);
  ASSERT_NE(s, nullptr);
  WriteSequentially(*s, content, 10000);
  ASSERT_TRUE(WaitUntil([&] { return s->stats().parts_sent_early == 5; }))
      << "sent early: " << s->stats().parts_sent_early;
  ASSERT_TRUE(s->Commit().ok());
  EXPECT_EQ(Stored("ckpt/large.pt"), content);
  EXPECT_EQ(s->stats().whole_puts, 0u);
  EXPECT_EQ(s->stats().parts_sent, 5u);

  const std::string shrunk = Pattern(4 * kPart, 5);
  auto t = Open("ckpt/shrunk.pt", options);
  ASSERT_NE(t, nullptr);
  WriteSequentially(*t, shrunk, kPart);
  ASSERT_TRUE(WaitUntil([&] { return t->stats().parts_sent_early == 4; }));
  ASSERT_TRUE(t->Truncate(kPart + kPart / 2).ok());
  ASSERT_TRUE(t->Commit().ok());
  EXPECT_EQ(Stored("ckpt/shrunk.pt"), shrunk.substr(0, kPart + kPart / 2));
  EXPECT_EQ(t->stats().writer_restarts, 1u);
  EXPECT_EQ(t->stats().whole_puts, 1u);
  EXPECT_EQ(memory_->OpenUploads(), 0u) << "the first upload was aborted";
}

// Write-back sessions start the spool's disk write every write_behind_bytes, so that Seal's
// fdatasync has little left; none is started without the option.
TEST_F(WriteSessionTest, TheSpoolIsWrittenBehindEveryWriteBehindBytes) {
  const std::string content = Pattern(5 * kPart, 3);
  WriteSessionOptions options;
  options.upload_early = false;
  options.write_behind_bytes = kPart;
  auto s = Open("ckpt/behind.pt", options);
  ASSERT_NE(s, nullptr);
  WriteSequentially(*s, content, kPart / 4);
  EXPECT_EQ(s->stats().write_behinds, 5u);
  ASSERT_TRUE(s->Seal().ok());
  auto info = s->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Stored("ckpt/behind.pt"), content);

  auto plain = Open("ckpt/plain.pt");
  ASSERT_NE(plain, nullptr);
  WriteSequentially(*plain, content, kPart / 4);
  EXPECT_EQ(plain->stats().write_behinds, 0u);
}

// The digest a file of `content` has under kPart parts.
uint64_t DigestOf(const std::string& content) {
  std::vector<uint64_t> hashes;
  for (uint64_t at = 0; at < content.size(); at += kPart) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPart, content.size() - at));
    hashes.push_back(PartHash(Span(content).subspan(at, n)));
  }
  return CombinePartHashes(hashes);
}

TEST(PartHasherTest, APartHashedInPiecesHashesAsAWhole) {
  const std::string part = testing::RandomBytes(3 * kPartHashPiece + 12345, 61);
  PartHasher hasher;
  ASSERT_TRUE(hasher.Update(Span(part).subspan(0, 2 * kPartHashPiece)).ok());
  ASSERT_TRUE(hasher.Update(Span(part).subspan(2 * kPartHashPiece)).ok());
  EXPECT_EQ(hasher.Finish(), PartHash(Span(part)));
  // A piece after a short one would hash differently from the whole: refused.
  PartHasher uneven;
  ASSERT_TRUE(uneven.Update(Span(part).subspan(0, 100)).ok());
  EXPECT_EQ(uneven.Update(Span(part).subspan(100, 100)).code(), StatusCode::kInvalidArgument);
}

class SpoolDigestTest : public WriteSessionTest {
 protected:
  WriteSessionOptions BackOptions() {
    WriteSessionOptions options;
    options.upload_early = false;
    options.digest = true;
    options.hash_pool = &hash_pool_;
    return options;
  }
  ThreadPool hash_pool_{2, "hashes"};
};

// Each whole part is hashed in the background as it is completed; Seal hashes only the last
// part and the parts written again since. The digest is of the file's bytes, in any write order.
TEST_F(SpoolDigestTest, TheDigestIsMadeWhileWritingAndIsTheFilesWhateverTheWriteOrder) {
  const std::string content = Pattern(5 * kPart + 1234, 4);
  auto s = Open("ckpt/digest.pt", BackOptions());
  ASSERT_NE(s, nullptr);
  WriteSequentially(*s, content, 10000);
  ASSERT_TRUE(s->Seal().ok());
  ASSERT_TRUE(s->digest().has_value());
  EXPECT_EQ(*s->digest(), DigestOf(content));
  EXPECT_EQ(s->stats().parts_hashed_early, 5u);
  EXPECT_EQ(s->stats().parts_hashed_at_seal, 1u);
  auto info = s->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Stored("ckpt/digest.pt"), content);

  // Backwards, and the first part patched after it was whole (a zip writer's header).
  std::string patched = Pattern(3 * kPart + 10, 5);
  auto r = Open("ckpt/patched.pt", BackOptions());
  ASSERT_NE(r, nullptr);
  for (int64_t off = static_cast<int64_t>(patched.size()) - 4096; off > -4096; off -= 4096) {
    const uint64_t at = static_cast<uint64_t>(std::max<int64_t>(off, 0));
    const size_t n = static_cast<size_t>(std::min<uint64_t>(4096, patched.size() - at));
    ASSERT_TRUE(r->Write(at, Span(patched).subspan(at, n)).ok());
  }
  patched.replace(100, 6, "header");
  ASSERT_TRUE(r->Write(100, Span(std::string("header"))).ok());
  ASSERT_TRUE(r->Seal().ok());
  // Part 0 was hashed again after the patch, in the background or by Seal (whichever came
  // first); the digest is of the patched bytes either way.
  EXPECT_EQ(*r->digest(), DigestOf(patched));
  EXPECT_GE(r->stats().parts_hashed_at_seal, 1u);  // The last part.
  ASSERT_TRUE(r->Commit().ok());
  EXPECT_EQ(Stored("ckpt/patched.pt"), patched);

  auto empty = Open("ckpt/empty.pt", BackOptions());
  ASSERT_NE(empty, nullptr);
  ASSERT_TRUE(empty->Seal().ok());
  EXPECT_EQ(*empty->digest(), CombinePartHashes({}));
  ASSERT_TRUE(empty->Commit().ok());
}

// A spool file damaged after Seal (a failing disk) is never uploaded: Commit says Corruption,
// aborts the upload, and nothing appears under the key. Whole parts and the last part alike.
TEST_F(SpoolDigestTest, ADamagedSpoolFileIsNeverUploaded) {
  for (uint64_t whole_put_bytes : {uint64_t{0}, 4 * kPart})
    for (uint64_t damaged_at : {kPart + 7, 3 * kPart + 100}) {
      SCOPED_TRACE("whole_put_bytes " + std::to_string(whole_put_bytes));
      const std::string key =
          "ckpt/damaged-" + std::to_string(damaged_at) + "-" + std::to_string(whole_put_bytes);
      const std::string content = Pattern(3 * kPart + 500, 6);
      WriteSessionOptions options = BackOptions();
      options.whole_put_bytes = whole_put_bytes;
      auto s = Open(key, options);
      ASSERT_NE(s, nullptr);
      WriteSequentially(*s, content, 8192);
      ASSERT_TRUE(s->Seal().ok());
      s->KeepSpoolFile();
      ASSERT_TRUE(testing::FlipByteAt(s->spool_path(), damaged_at));
      auto info = s->Commit();
      EXPECT_EQ(info.status().code(), StatusCode::kCorruption) << damaged_at;
      EXPECT_TRUE(s->spool_damaged());
      EXPECT_EQ(Stored(key), "<absent>");
      EXPECT_EQ(memory_->OpenUploads(), 0u);
      EXPECT_EQ(s->Commit().status().code(), StatusCode::kFailedPrecondition);  // Aborted.
      ::unlink(s->spool_path().c_str());
    }
}

// After a restart the journal's digest is what the adopted spool file is checked against.
TEST_F(SpoolDigestTest, AnAdoptedSpoolFileIsCheckedAgainstTheJournalsDigest) {
  const std::string content = Pattern(2 * kPart + 77, 7);
  for (uint64_t whole_put_bytes : {uint64_t{0}, 4 * kPart})
    for (bool damage : {false, true}) {
      SCOPED_TRACE("whole_put_bytes " + std::to_string(whole_put_bytes));
      const std::string key = std::string(damage ? "ckpt/adopted-bad-" : "ckpt/adopted-") +
                              std::to_string(whole_put_bytes);
      auto s = Open(key, BackOptions());
      ASSERT_NE(s, nullptr);
      WriteSequentially(*s, content, 8192);
      ASSERT_TRUE(s->Seal().ok());
      const uint64_t digest = *s->digest();
      const std::string spool = s->spool_path();
      s->KeepSpoolFile();
      s.reset();  // The process died after the journal recorded the file.
      if (damage) {
        ASSERT_TRUE(testing::FlipByteAt(spool, 5));
      }
      WriteSessionOptions options;
      options.part_size = kPart;
      options.upload_early = false;
      options.expected_digest = digest;
      options.whole_put_bytes = whole_put_bytes;
      auto adopted = WriteSession::Adopt(gated_, key, spool, content.size(), options, &pool_);
      ASSERT_TRUE(adopted.ok()) << adopted.status().ToString();
      auto info = (*adopted)->Commit();
      if (damage) {
        EXPECT_EQ(info.status().code(), StatusCode::kCorruption);
        EXPECT_EQ(Stored(key), "<absent>");
      } else {
        ASSERT_TRUE(info.ok()) << info.status().ToString();
        EXPECT_EQ(Stored(key), content);
      }
      EXPECT_EQ((*adopted)->stats().whole_puts, !damage && whole_put_bytes != 0 ? 1u : 0u);
    }
}

// A write-back file continued from a copy of its sealed spool (a write after fsync, an open
// of a file still waiting): the copy is checked against the sealed file's digest before the
// session takes writes, and its part hashes stand for the bytes in the next Seal's digest, so
// a copy damaged later is not uploaded either, and Seal hashes only what was written since.
TEST_F(SpoolDigestTest, AReopenedCopyIsCheckedAgainstTheSealedFilesDigest) {
  const std::string content = Pattern(4 * kPart + 300, 14);
  auto sealed = Open("ckpt/sealed.pt", BackOptions());
  ASSERT_NE(sealed, nullptr);
  WriteSequentially(*sealed, content, 8192);
  ASSERT_TRUE(sealed->Seal().ok());
  const uint64_t digest = *sealed->digest();
  auto copy_of_sealed = [&]() -> std::string {
    const int fd = ::open(sealed->spool_path().c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    auto copy = CopySpoolFile(fd, content.size(), spool_.str());
    ::close(fd);
    EXPECT_TRUE(copy.ok()) << copy.status().ToString();
    return copy.ok() ? *copy : "";
  };
  WriteSessionOptions options = BackOptions();
  options.part_size = kPart;
  options.expected_digest = digest;

  // Damaged before the copy (the sealed file's disk): refused, the copy stays the caller's.
  const std::string bad = copy_of_sealed();
  ASSERT_TRUE(testing::FlipByteAt(bad, 2 * kPart + 9));
  auto refused = WriteSession::Reopen(gated_, "ckpt/bad.pt", bad, content.size(), options, &pool_);
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  struct stat st;
  EXPECT_EQ(::stat(bad.c_str(), &st), 0) << "a refused copy was removed";

  // Intact: taken; a write into the last part, and Seal hashes that part only.
  auto good = WriteSession::Reopen(gated_, "ckpt/good.pt", copy_of_sealed(), content.size(),
                                   options, &pool_);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  std::string expected = content + "tail";
  ASSERT_TRUE((*good)->Write(content.size(), Span(std::string("tail"))).ok());
  ASSERT_TRUE((*good)->Seal().ok());
  EXPECT_EQ(*(*good)->digest(), DigestOf(expected));
  EXPECT_EQ((*good)->stats().parts_hashed_early, 0u);
  EXPECT_EQ((*good)->stats().parts_hashed_at_seal, 1u);
  auto info = (*good)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Stored("ckpt/good.pt"), expected);

  // Damaged after the check, in a part not written since: Seal's digest is of the checked
  // bytes, so the upload refuses the damaged ones.
  auto later = WriteSession::Reopen(gated_, "ckpt/later.pt", copy_of_sealed(), content.size(),
                                    options, &pool_);
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  ASSERT_TRUE((*later)->Write(content.size(), Span(std::string("more"))).ok());
  ASSERT_TRUE(testing::FlipByteAt((*later)->spool_path(), kPart + 1));
  ASSERT_TRUE((*later)->Seal().ok());
  EXPECT_EQ((*later)->Commit().status().code(), StatusCode::kCorruption);
  EXPECT_EQ(Stored("ckpt/later.pt"), "<absent>");

  // A file ending on a part boundary (its last part's hash kept too), cut inside a part
  // after the reopen: the digest is of the cut file.
  const std::string whole = Pattern(3 * kPart, 15);
  auto boundary = Open("ckpt/boundary.pt", BackOptions());
  ASSERT_NE(boundary, nullptr);
  WriteSequentially(*boundary, whole, 8192);
  ASSERT_TRUE(boundary->Seal().ok());
  options.expected_digest = *boundary->digest();
  const int fd = ::open(boundary->spool_path().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto copy = CopySpoolFile(fd, whole.size(), spool_.str());
  ::close(fd);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto cut = WriteSession::Reopen(gated_, "ckpt/cut.pt", *copy, whole.size(), options, &pool_);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  ASSERT_TRUE((*cut)->Truncate(kPart + 10).ok());
  ASSERT_TRUE((*cut)->Seal().ok());
  EXPECT_EQ(*(*cut)->digest(), DigestOf(whole.substr(0, kPart + 10)));
  ASSERT_TRUE((*cut)->Commit().ok());
  EXPECT_EQ(Stored("ckpt/cut.pt"), whole.substr(0, kPart + 10));
}

TEST_F(WriteSessionTest, RandomOffsetsAndAHeaderPatchedAtTheEnd) {
  // A zip or safetensors writer: data in any order, then the header at offset 0 rewritten.
  std::string content = Pattern(4 * kPart + 77, 2);
  auto s = Open("model.safetensors");
  ASSERT_NE(s, nullptr);
  for (int i : {3, 1, 4, 0, 2}) {
    uint64_t off = i * kPart;
    uint64_t n = std::min<uint64_t>(kPart, content.size() - off);
    ASSERT_TRUE(s->Write(off, Span(content).subspan(off, n)).ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return s->stats().parts_sent == 4; }));
  content.replace(0, 8, "HEADER!!");
  ASSERT_TRUE(s->Write(0, Span(content).subspan(0, 8)).ok());
  auto info = s->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Stored("model.safetensors"), content);
  EXPECT_GE(s->stats().parts_resent, 1u) << "part 0 went up again with the new header";
}

TEST_F(WriteSessionTest, HolesAreZerosAndTruncateExtendsWithZeros) {
  auto s = Open("sparse.bin");
  ASSERT_NE(s, nullptr);
  const std::string tail = "end of a sparse file";
  ASSERT_TRUE(s->Write(3 * kPart, Span(tail)).ok());
  ASSERT_TRUE(s->Truncate(3 * kPart + tail.size() + 100).ok());
  auto info = s->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  std::string expected(3 * kPart, '\0');
  expected += tail;
  expected += std::string(100, '\0');
  EXPECT_EQ(Stored("sparse.bin"), expected);
}

TEST_F(WriteSessionTest, AFileThatShrankBelowSentPartsIsUploadedAgain) {
  const std::string content = Pattern(4 * kPart, 3);
  auto s = Open("shrunk.bin");
  ASSERT_NE(s, nullptr);
  WriteSequentially(*s, content, kPart);
  ASSERT_TRUE(WaitUntil([&] { return s->stats().parts_sent == 4; }));
  ASSERT_TRUE(s->Truncate(kPart + kPart / 2).ok());
  auto info = s->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Stored("shrunk.bin"), content.substr(0, kPart + kPart / 2));
  EXPECT_EQ(s->stats().writer_restarts, 1u);
}

TEST_F(WriteSessionTest, UploadsThatFailWhileWritingAreSentAgainAtCommit) {
  faults_->FailNext(ufs::UfsOp::kWrite, 3);
  const std::string content = Pattern(3 * kPart + 5, 4);
  auto s = Open("flaky.bin");
  ASSERT_NE(s, nullptr);
  WriteSequentially(*s, content, 4096);
  ASSERT_TRUE(WaitUntil([&] { return s->stats().upload_failures == 3; }));
  auto info = s->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Stored("flaky.bin"), content);
}

TEST_F(WriteSessionTest, AFailureAtCommitIsReportedAndNothingAppears) {
  const std::string content = Pattern(2 * kPart + 5, 5);
  auto s = Open("doomed.bin");
  ASSERT_NE(s, nullptr);
  WriteSequentially(*s, content, kPart);
  ASSERT_TRUE(WaitUntil([&] { return s->stats().parts_sent == 2; }));
  faults_->FailNext(ufs::UfsOp::kWrite, 1, UnavailableError("injected outage"));
  auto info = s->Commit();
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable) << info.status().ToString();
  EXPECT_FALSE(memory_->Get("doomed.bin").has_value());
  auto again = s->Commit();  // The source is back: the same session commits.
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Stored("doomed.bin"), content);
}

TEST_F(WriteSessionTest, WritesAfterCommitOrAbortAndPastTheLargestObjectAreRefused) {
  auto s = Open("closed.bin");
  ASSERT_NE(s, nullptr);
  const std::string x = "x";
  EXPECT_EQ(s->Write(UINT64_MAX - 1, Span(x)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Truncate(UINT64_MAX).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s->Write(0, Span(x)).ok());
  ASSERT_TRUE(s->Commit().ok());
  EXPECT_EQ(s->Write(1, Span(x)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->Abort().code(), StatusCode::kFailedPrecondition);
  auto t = Open("aborted.bin");
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Write(0, Span(Pattern(2 * kPart, 6))).ok());
  ASSERT_TRUE(t->Abort().ok());
  EXPECT_TRUE(t->Abort().ok());
  EXPECT_EQ(t->Write(0, Span(x)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(t->Commit().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(memory_->Get("aborted.bin").has_value());
}

TEST_F(WriteSessionTest, ConcurrentWritersOfOneFile) {
  const std::string content = Pattern(6 * kPart + 999, 7);
  auto s = Open("concurrent.bin");
  ASSERT_NE(s, nullptr);
  std::vector<std::thread> threads;
  constexpr int kThreads = 4;
  constexpr size_t kChunk = 3000;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t off = t * kChunk; off < content.size(); off += kThreads * kChunk) {
        size_t n = std::min(kChunk, content.size() - off);
        EXPECT_TRUE(s->Write(off, Span(content).subspan(off, n)).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  auto info = s->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Stored("concurrent.bin"), content);
}

TEST_F(WriteSessionTest, UploadsInFlightStayUnderTheCap) {
  auto gate = std::make_shared<Gate>();
  gated_->set_write_gate(gate);
  WriteSessionOptions options;
  options.max_uploads_in_flight = 2;
  auto s = Open("capped.bin", options);
  ASSERT_NE(s, nullptr);
  const std::string content = Pattern(8 * kPart + 1, 8);
  WriteSequentially(*s, content, kPart);
  ASSERT_TRUE(gate->WaitForArrivals(2));
  EXPECT_EQ(gated_->max_concurrent_parts(), 2);
  gate->Open();
  auto info = s->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Stored("capped.bin"), content);
  EXPECT_LE(gated_->max_concurrent_parts(), 2);
}

TEST_F(WriteSessionTest, TheConditionIsCheckedAtCommit) {
  memory_->Put("exists.bin", "old");
  WriteSessionOptions options;
  options.condition = ufs::WriteCondition::Absent();
  auto s = Open("exists.bin", options);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Write(0, Span(std::string("new"))).ok());
  EXPECT_EQ(s->Commit().status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Stored("exists.bin"), "old");
}

TEST_F(WriteSessionTest, ADroppedSessionLeavesNoObjectAndNoSpoolFile) {
  std::string spool;
  {
    auto s = Open("dropped.bin");
    ASSERT_NE(s, nullptr);
    spool = s->spool_path();
    ASSERT_TRUE(s->Write(0, Span(Pattern(3 * kPart, 9))).ok());
    struct stat st;
    EXPECT_EQ(::stat(spool.c_str(), &st), 0);
  }
  struct stat st;
  EXPECT_NE(::stat(spool.c_str(), &st), 0) << spool << " is still there";
  EXPECT_FALSE(memory_->Get("dropped.bin").has_value());
}

// A write after a commit (a write-through fsync, then more writes) continues in a session that
// takes over the committed spool file instead of copying it: the whole file, old bytes and new,
// goes up again at the next commit, its full parts early.
TEST_F(WriteSessionTest, AReopenedSpoolFileTakesWritesAndCommitsTheWholeFileAgain) {
  const std::string first = Pattern(3 * kPart + 100, 10);
  std::string spool;
  std::string version;
  {
    auto s = Open("log.txt");
    ASSERT_NE(s, nullptr);
    WriteSequentially(*s, first, 7000);
    auto info = s->Commit();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    version = info->version;
    spool = s->spool_path();
    s->KeepSpoolFile();
  }
  struct stat st;
  ASSERT_EQ(::stat(spool.c_str(), &st), 0) << "a kept spool file was removed";
  WriteSessionOptions options;
  options.part_size = kPart;
  options.condition = ufs::WriteCondition::Version(version);
  auto reopened = WriteSession::Reopen(gated_, "log.txt", spool, first.size(), options, &pool_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  WriteSession& s = **reopened;
  EXPECT_EQ(s.size(), first.size());
  // The three full parts go up before any write, as they would while being written.
  ASSERT_TRUE(WaitUntil([&] { return s.stats().parts_sent_early == 3; }))
      << "sent early: " << s.stats().parts_sent_early;
  const std::string more = Pattern(kPart, 11);
  ASSERT_TRUE(s.Write(first.size(), Span(more)).ok());
  ASSERT_TRUE(s.Write(5, Span(std::string("patched"))).ok());  // Into a part already sent.
  std::string expected = first + more;
  expected.replace(5, 7, "patched");
  std::string back(expected.size(), '\0');
  auto n = s.ReadAt(0, std::span<char>(back.data(), back.size()));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(back, expected);
  auto info = s.Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, expected.size());
  EXPECT_EQ(Stored("log.txt"), expected);
  EXPECT_GE(s.stats().parts_resent, 1U);  // The patched part went up again.
  reopened->reset();
  EXPECT_NE(::stat(spool.c_str(), &st), 0) << "the reopened session did not remove " << spool;
}

TEST_F(WriteSessionTest, AReopenedFileIsCutToItsSizeAndOneTooShortIsRefusedAndKept) {
  const std::string path = spool_.str() + "/given";
  PutFile(path, Pattern(5000, 12));
  WriteSessionOptions options;
  options.part_size = kPart;
  // Shorter than it claims: refused, and the file is still the caller's.
  auto refused = WriteSession::Reopen(gated_, "short.bin", path, 6000, options, &pool_);
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  // Longer than its size: the rest is cut.
  auto reopened = WriteSession::Reopen(gated_, "cut.bin", path, 3000, options, &pool_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 3000);
  ASSERT_TRUE((*reopened)->Commit().ok());
  EXPECT_EQ(Stored("cut.bin"), Pattern(5000, 12).substr(0, 3000));
}

TEST_F(WriteSessionTest, ACopiedSpoolFileHoldsTheBytesAndZerosPastTheSourcesEnd) {
  const std::string source = spool_.str() + "/sealed";
  const std::string content = Pattern(3 * kPart + 17, 13);
  PutFile(source, content);
  const int fd = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto copy = CopySpoolFile(fd, content.size() + 500, spool_.str());
  ::close(fd);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_NE(*copy, source);
  EXPECT_EQ(FileContent(*copy), content + std::string(500, '\0'));
  // From another file system (tmpfs, where there is one): the kernel refuses a copy across
  // them (EXDEV), and the read-write loop copies.
  const std::string elsewhere =
      "/dev/shm/cairn-copy-source-" + std::to_string(::getpid()) + "-" + std::to_string(fd);
  std::ofstream probe(elsewhere, std::ios::binary);
  if (probe) {
    probe << content;
    probe.close();
    const int other = ::open(elsewhere.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(other, 0);
    auto crossed = CopySpoolFile(other, content.size() + 3, spool_.str());
    ::close(other);
    ::unlink(elsewhere.c_str());
    ASSERT_TRUE(crossed.ok()) << crossed.status().ToString();
    EXPECT_EQ(FileContent(*crossed), content + std::string(3, '\0'));
    ::unlink(crossed->c_str());
  }
  // A descriptor that cannot be read: an error, and no file is left behind.
  auto none = CopySpoolFile(-1, 10, spool_.str());
  EXPECT_FALSE(none.ok());
  const auto files = std::distance(std::filesystem::directory_iterator(spool_.str()),
                                   std::filesystem::directory_iterator());
  EXPECT_EQ(files, 2);  // "sealed" and the copy.
}

}  // namespace
}  // namespace cairn::write
