#include "ufs/object_writer_behaviour.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace cairn::ufs::testing {
namespace {

std::span<const char> Span(const std::string& s) { return {s.data(), s.size()}; }

std::span<const char> Slice(const std::string& s, uint64_t offset, uint64_t n) {
  return Span(s).subspan(offset, n);
}

}  // namespace

void ObjectWriterBehaviour::SetUp() {
  store_ = GetParam().make_store(::testing::UnitTest::GetInstance()->current_test_info()->name());
  ASSERT_NE(store_, nullptr);
  part_ = GetParam().part_size;
}

StatusOr<std::unique_ptr<ObjectWriter>> ObjectWriterBehaviour::Start(const std::string& key,
                                                                     WriteCondition condition) {
  WriterOptions options;
  options.part_size = part_;
  options.condition = std::move(condition);
  return store_->StartWrite(key, options);
}

std::string ObjectWriterBehaviour::Pattern(uint64_t n, char seed) const {
  std::string out(n, '\0');
  for (uint64_t i = 0; i < n; ++i) {
    out[i] = static_cast<char>('a' + (seed + i / 4093 + i * 7) % 26);
  }
  return out;
}

std::string ObjectWriterBehaviour::ReadAll(const std::string& key) {
  StatusOr<ObjectInfo> info = store_->Stat(key);
  if (!info.ok()) return "<" + info.status().ToString() + ">";
  std::string out(info->size, '\0');
  StatusOr<size_t> n = store_->Read(key, info->version, 0, std::span<char>(out.data(), out.size()));
  if (!n.ok()) return "<" + n.status().ToString() + ">";
  out.resize(*n);
  return out;
}

StatusOr<ObjectInfo> ObjectWriterBehaviour::WriteWhole(const std::string& key,
                                                       const std::string& content,
                                                       WriteCondition condition) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> w, Start(key, std::move(condition)));
  CAIRN_ASSIGN_OR_RETURN(uint32_t count, w->layout().PartCount(content.size()));
  for (uint32_t i = 0; i + 1 < count; ++i) {
    CAIRN_RETURN_IF_ERROR(
        w->WritePart(i, Slice(content, w->layout().Offset(i), w->layout().Size(i))));
  }
  const uint64_t tail = count == 0 ? 0 : w->layout().Offset(count - 1);
  return w->Commit(content.size(), Span(content).subspan(tail));
}

TEST_P(ObjectWriterBehaviour, SmallObjectAppearsWithTheVersionCommitReturned) {
  const std::string content = Pattern(1000, 1);
  StatusOr<ObjectInfo> info = WriteWhole("dir/small.bin", content);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->key, "dir/small.bin");
  EXPECT_EQ(info->size, 1000u);
  StatusOr<ObjectInfo> stat = store_->Stat("dir/small.bin");
  ASSERT_TRUE(stat.ok()) << stat.status().ToString();
  EXPECT_EQ(stat->version, info->version) << "a read may expect the version Commit returned";
  EXPECT_EQ(ReadAll("dir/small.bin"), content);
}

TEST_P(ObjectWriterBehaviour, EmptyObject) {
  StatusOr<ObjectInfo> info = WriteWhole("empty", "");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  StatusOr<ObjectInfo> stat = store_->Stat("empty");
  ASSERT_TRUE(stat.ok()) << stat.status().ToString();
  EXPECT_EQ(stat->size, 0u);
  EXPECT_EQ(stat->version, info->version);
}

TEST_P(ObjectWriterBehaviour, NothingIsVisibleBeforeCommitThenAllOfIt) {
  const std::string content = Pattern(3 * part_ + 123, 2);
  auto w = Start("ckpt/step-1.pt");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE((*w)->WritePart(i, Slice(content, i * part_, part_)).ok());
  }
  EXPECT_EQ(store_->Stat("ckpt/step-1.pt").status().code(), StatusCode::kNotFound);
  ListOptions list;
  list.prefix = "ckpt/";
  StatusOr<ListResult> listed = store_->List(list);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_TRUE(listed->objects.empty())
      << "an uncommitted write shows up as " + listed->objects.front().key;
  StatusOr<ObjectInfo> info = (*w)->Commit(content.size(), Span(content).subspan(3 * part_));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, content.size());
  EXPECT_EQ(ReadAll("ckpt/step-1.pt"), content);
  listed = store_->List(list);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->objects.size(), 1u);
  EXPECT_EQ(listed->objects[0].key, "ckpt/step-1.pt");
}

TEST_P(ObjectWriterBehaviour, PartsWrittenConcurrentlyAndOutOfOrder) {
  const uint32_t parts = 4;
  const std::string content = Pattern(parts * part_ + 7, 3);
  auto w = Start("parallel.bin");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (uint32_t i = 0; i < parts; ++i) {
    const uint32_t index = parts - 1 - i;  // Last part first.
    threads.emplace_back([&, index] {
      if (!(*w)->WritePart(index, Slice(content, index * part_, part_)).ok()) ++failures;
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  StatusOr<ObjectInfo> info = (*w)->Commit(content.size(), Span(content).subspan(parts * part_));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(ReadAll("parallel.bin"), content);
}

TEST_P(ObjectWriterBehaviour, APartWrittenAgainReplacesTheEarlierCopy) {
  // A zip writer patching a header, or a random-offset writer, dirties a part that went up.
  std::string content = Pattern(2 * part_ + 10, 4);
  auto w = Start("patched.bin");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->WritePart(0, Slice(content, 0, part_)).ok());
  ASSERT_TRUE((*w)->WritePart(1, Slice(content, part_, part_)).ok());
  content.replace(0, 16, "PATCHED-HEADER!!");
  ASSERT_TRUE((*w)->WritePart(0, Slice(content, 0, part_)).ok());
  ASSERT_TRUE((*w)->Commit(content.size(), Span(content).subspan(2 * part_)).ok());
  EXPECT_EQ(ReadAll("patched.bin"), content);
}

TEST_P(ObjectWriterBehaviour, PartsPastTheEndAreRefusedAndANewWriterSucceeds) {
  // The file was truncated after parts had gone up: that writer cannot commit it.
  const std::string content = Pattern(3 * part_, 5);
  auto w = Start("truncated.bin");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE((*w)->WritePart(i, Slice(content, i * part_, part_)).ok());
  }
  const uint64_t size = part_ + part_ / 2;
  StatusOr<ObjectInfo> info = (*w)->Commit(size, Slice(content, part_, part_ / 2));
  EXPECT_EQ(info.status().code(), StatusCode::kFailedPrecondition) << info.status().ToString();
  EXPECT_EQ(store_->Stat("truncated.bin").status().code(), StatusCode::kNotFound);
  Status aborted = (*w)->Abort();
  EXPECT_TRUE(aborted.ok() || !GetParam().aborts_uploads) << aborted.ToString();
  StatusOr<ObjectInfo> again = WriteWhole("truncated.bin", content.substr(0, size));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ReadAll("truncated.bin"), content.substr(0, size));
}

TEST_P(ObjectWriterBehaviour, AnObjectThatShrankToOnePartStillCommits) {
  const std::string content = Pattern(2 * part_, 6);
  auto w = Start("shrunk.bin");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->WritePart(0, Slice(content, 0, part_)).ok());
  ASSERT_TRUE((*w)->Commit(100, Slice(content, 0, 100)).ok());
  EXPECT_EQ(ReadAll("shrunk.bin"), content.substr(0, 100));
}

TEST_P(ObjectWriterBehaviour, MalformedCallsAreRefusedAndTheWriterStaysUsable) {
  const std::string content = Pattern(2 * part_ + 5, 7);
  auto w = Start("careful.bin");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->WritePart(0, Slice(content, 0, part_ - 1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*w)->WritePart(PartLayout::kMaxParts, Slice(content, 0, part_)).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE((*w)->WritePart(1, Slice(content, part_, part_)).ok());
  // Part 0 is missing.
  EXPECT_EQ((*w)->Commit(content.size(), Span(content).subspan(2 * part_)).status().code(),
            StatusCode::kFailedPrecondition);
  // The final part's length does not match the size.
  EXPECT_EQ((*w)->Commit(content.size(), Span(content).subspan(2 * part_ + 1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Stat("careful.bin").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE((*w)->WritePart(0, Slice(content, 0, part_)).ok());
  StatusOr<ObjectInfo> info = (*w)->Commit(content.size(), Span(content).subspan(2 * part_));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(ReadAll("careful.bin"), content);
  EXPECT_EQ((*w)->WritePart(0, Slice(content, 0, part_)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*w)->Abort().code(), StatusCode::kFailedPrecondition);
}

TEST_P(ObjectWriterBehaviour, AbortLeavesNothingUnderTheKey) {
  const std::string content = Pattern(2 * part_, 8);
  auto w = Start("aborted.bin");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->WritePart(0, Slice(content, 0, part_)).ok());
  Status aborted = (*w)->Abort();
  if (GetParam().aborts_uploads) {
    EXPECT_TRUE(aborted.ok()) << aborted.ToString();
  } else {
    EXPECT_EQ(aborted.code(), StatusCode::kUnimplemented) << aborted.ToString();
  }
  EXPECT_EQ((*w)->Commit(part_, Slice(content, 0, part_)).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Stat("aborted.bin").status().code(), StatusCode::kNotFound);
  if (GetParam().aborts_uploads) {
    EXPECT_TRUE((*w)->Abort().ok()) << "Abort is idempotent";
  }
}

TEST_P(ObjectWriterBehaviour, AWriterDroppedWithoutCommitLeavesNothing) {
  const std::string content = Pattern(2 * part_, 9);
  {
    auto w = Start("dropped.bin");
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->WritePart(0, Slice(content, 0, part_)).ok());
  }
  EXPECT_EQ(store_->Stat("dropped.bin").status().code(), StatusCode::kNotFound);
  ListOptions list;
  list.prefix = "";
  list.delimiter = "";
  StatusOr<ListResult> listed = store_->List(list);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->objects.empty());
}

TEST_P(ObjectWriterBehaviour, AbortUploadDiscardsWhatAWritersTokenNames) {
  // What the next start of a process that died while writing does with the token it saved.
  const std::string content = Pattern(2 * part_, 10);
  auto w = Start("left.bin");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->UploadToken(), "");  // Nothing in the store yet.
  ASSERT_TRUE((*w)->Begin().ok());     // Created before any data goes there...
  const std::string token = (*w)->UploadToken();
  ASSERT_FALSE(token.empty());
  ASSERT_TRUE((*w)->Begin().ok());
  ASSERT_TRUE((*w)->WritePart(0, Slice(content, 0, part_)).ok());
  EXPECT_EQ((*w)->UploadToken(), token);  // ...and the parts go to it.
  EXPECT_EQ(store_->AbortUpload("left.bin", "").code(), StatusCode::kInvalidArgument);
  Status aborted = store_->AbortUpload("left.bin", token);
  if (!GetParam().aborts_uploads) {
    EXPECT_EQ(aborted.code(), StatusCode::kUnimplemented) << aborted.ToString();
    return;
  }
  ASSERT_TRUE(aborted.ok()) << aborted.ToString();
  EXPECT_TRUE(store_->AbortUpload("left.bin", token).ok()) << "gone already is OK";
  // The part is gone: the writer cannot make the object out of it.
  EXPECT_FALSE((*w)->Commit(2 * part_, Slice(content, part_, part_)).ok());
  EXPECT_EQ(store_->Stat("left.bin").status().code(), StatusCode::kNotFound);
}

TEST_P(ObjectWriterBehaviour, ExclusiveCreateRefusesAnExistingObject) {
  for (uint64_t size : {uint64_t{100}, 2 * part_ + 1}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::string key = "excl-" + std::to_string(size);
    const std::string first = Pattern(size, 10);
    StatusOr<ObjectInfo> created = WriteWhole(key, first, WriteCondition::Absent());
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    StatusOr<ObjectInfo> again = WriteWhole(key, Pattern(size, 11), WriteCondition::Absent());
    EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().ToString();
    EXPECT_EQ(ReadAll(key), first);
  }
}

TEST_P(ObjectWriterBehaviour, ReplaceIfVersionRefusesAChangedOrDeletedObject) {
  for (uint64_t size : {uint64_t{100}, 2 * part_ + 1}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::string key = "cas-" + std::to_string(size);
    StatusOr<ObjectInfo> v1 = WriteWhole(key, Pattern(size, 12));
    ASSERT_TRUE(v1.ok()) << v1.status().ToString();
    const std::string second = Pattern(size + 1, 13);
    StatusOr<ObjectInfo> v2 = WriteWhole(key, second);
    ASSERT_TRUE(v2.ok()) << v2.status().ToString();
    ASSERT_NE(v1->version, v2->version);
    // A writer that read v1 must not overwrite v2 blindly.
    StatusOr<ObjectInfo> stale =
        WriteWhole(key, Pattern(size, 14), WriteCondition::Version(v1->version));
    EXPECT_EQ(stale.status().code(), StatusCode::kFailedPrecondition) << stale.status().ToString();
    EXPECT_EQ(ReadAll(key), second);
    const std::string third = Pattern(size, 15);
    StatusOr<ObjectInfo> v3 = WriteWhole(key, third, WriteCondition::Version(v2->version));
    ASSERT_TRUE(v3.ok()) << v3.status().ToString();
    EXPECT_EQ(ReadAll(key), third);
    ASSERT_TRUE(store_->Delete(key).ok());
    StatusOr<ObjectInfo> gone = WriteWhole(key, third, WriteCondition::Version(v3->version));
    EXPECT_EQ(gone.status().code(), StatusCode::kFailedPrecondition) << gone.status().ToString();
    EXPECT_EQ(store_->Stat(key).status().code(), StatusCode::kNotFound);
  }
}

// Where the store checks the condition with the commit, exactly one of the racing creators wins;
// where it checks just before (s3rver ignores If-None-Match), several may "win", and the object
// is then whole and one of theirs: never a mix, never a loser's bytes.
TEST_P(ObjectWriterBehaviour, RacingExclusiveCreators) {
  constexpr int kWriters = 6;
  std::vector<std::unique_ptr<ObjectWriter>> writers;
  std::vector<std::string> contents;
  for (int i = 0; i < kWriters; ++i) {
    auto w = Start("race.bin", WriteCondition::Absent());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    writers.push_back(std::move(w).value());
    contents.push_back(Pattern(500, static_cast<char>(20 + i)));
  }
  std::vector<Status> results(kWriters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = writers[i]->Commit(500, Span(contents[i])).status(); });
  }
  for (auto& t : threads) t.join();
  int winners = 0;
  std::vector<std::string> won;
  for (int i = 0; i < kWriters; ++i) {
    if (results[i].ok()) {
      ++winners;
      won.push_back(contents[i]);
    } else {
      EXPECT_EQ(results[i].code(), StatusCode::kAlreadyExists) << results[i].ToString();
    }
  }
  if (GetParam().atomic_exclusive_create) {
    EXPECT_EQ(winners, 1);
  } else {
    EXPECT_GE(winners, 1);
  }
  const std::string stored = ReadAll("race.bin");
  EXPECT_NE(std::find(won.begin(), won.end(), stored), won.end())
      << "the object holds bytes no winner wrote";
}

TEST_P(ObjectWriterBehaviour, WriteReplacesAWholeObject) {
  const std::string big = Pattern(3 * part_ + 9, 16);
  ASSERT_TRUE(store_->Write("whole.bin", Span(big)).ok());
  EXPECT_EQ(ReadAll("whole.bin"), big);
  ASSERT_TRUE(store_->Write("whole.bin", Span(std::string("short"))).ok());
  EXPECT_EQ(ReadAll("whole.bin"), "short");
}

}  // namespace cairn::ufs::testing

// --- Rename, MakeDir, RemoveDir ---

namespace cairn::ufs::testing {
namespace {

bool Lists(UnderStorage& store, const std::string& prefix, const std::string& common_prefix) {
  ListOptions options;
  options.prefix = prefix;
  StatusOr<ListResult> listed = store.List(options);
  if (!listed.ok()) return false;
  return std::find(listed->common_prefixes.begin(), listed->common_prefixes.end(), common_prefix) !=
         listed->common_prefixes.end();
}

StatusOr<ListResult> ListOf(UnderStorage& store, const std::string& prefix) {
  ListOptions options;
  options.prefix = prefix;
  return store.List(options);
}

}  // namespace

TEST_P(ObjectWriterBehaviour, RenameMovesTheWholeObjectAndRemovesTheOldName) {
  // Past two parts: on S3 stores configured with a low copy threshold this is a multipart copy.
  const std::string content = Pattern(2 * part_ + 1000, 'r');
  ASSERT_TRUE(WriteWhole("ckpt/.tmp-step-1", content).ok());
  StatusOr<ObjectInfo> moved = store_->Rename("ckpt/.tmp-step-1", "ckpt/step-1", {});
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->key, "ckpt/step-1");
  EXPECT_EQ(moved->size, content.size());
  EXPECT_EQ(ReadAll("ckpt/step-1"), content);
  EXPECT_EQ(store_->Stat("ckpt/.tmp-step-1").status().code(), StatusCode::kNotFound);
  StatusOr<ObjectInfo> stat = store_->Stat("ckpt/step-1");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(moved->version, stat->version) << "the returned version is what a read expects";
  // Into a directory that does not exist yet (S3 has none to create; folders make it).
  ASSERT_TRUE(store_->Rename("ckpt/step-1", "final/model.bin", {}).ok());
  EXPECT_EQ(ReadAll("final/model.bin"), content);
}

TEST_P(ObjectWriterBehaviour, RenameReplacesTheDestinationUnlessItMustBeAbsent) {
  ASSERT_TRUE(WriteWhole("new", "new bytes").ok());
  ASSERT_TRUE(WriteWhole("old", "old bytes, longer").ok());
  RenameOptions absent;
  absent.condition = WriteCondition::Absent();
  EXPECT_EQ(store_->Rename("new", "old", absent).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ReadAll("new"), "new bytes") << "a refused rename changes nothing";
  EXPECT_EQ(ReadAll("old"), "old bytes, longer");
  ASSERT_TRUE(store_->Rename("new", "old", {}).ok());
  EXPECT_EQ(ReadAll("old"), "new bytes");
  EXPECT_EQ(store_->Stat("new").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->Rename("old", "fresh", absent).ok());
  EXPECT_EQ(ReadAll("fresh"), "new bytes");
}

TEST_P(ObjectWriterBehaviour, RenameRefusesAMissingSourceAStaleVersionAndItself) {
  EXPECT_EQ(store_->Rename("missing", "x", {}).status().code(), StatusCode::kNotFound);
  StatusOr<ObjectInfo> written = WriteWhole("src", "v1");
  ASSERT_TRUE(written.ok());
  RenameOptions stale;
  stale.expected_version = written->version + "0";
  EXPECT_EQ(store_->Rename("src", "dst", stale).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Stat("dst").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Rename("src", "src", {}).status().code(), StatusCode::kInvalidArgument);
  RenameOptions current;
  current.expected_version = written->version;
  EXPECT_TRUE(store_->Rename("src", "dst", current).ok());
  EXPECT_EQ(ReadAll("dst"), "v1");
}

TEST_P(ObjectWriterBehaviour, AFileDoesNotReplaceADirectory) {
  ASSERT_TRUE(WriteWhole("f", "file").ok());
  ASSERT_TRUE(WriteWhole("d/inner", "inner").ok());
  EXPECT_EQ(store_->Rename("f", "d", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadAll("f"), "file");
  EXPECT_EQ(ReadAll("d/inner"), "inner");
}

TEST_P(ObjectWriterBehaviour, AnEmptyDirectoryListsAndIsRemovedOnlyWhenEmpty) {
  ASSERT_TRUE(store_->MakeDir("run").ok());
  ASSERT_TRUE(store_->MakeDir("run/ckpt").ok());
  EXPECT_TRUE(Lists(*store_, "", "run/"));
  EXPECT_TRUE(Lists(*store_, "run/", "run/ckpt/"));
  StatusOr<ListResult> empty = ListOf(*store_, "run/ckpt/");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->objects.empty()) << "the marker is not an object";
  EXPECT_TRUE(empty->common_prefixes.empty());
  EXPECT_TRUE(empty->directory_exists);
  EXPECT_EQ(store_->Stat("run/ckpt").status().code(), StatusCode::kNotFound)
      << "a directory is not an object";
  EXPECT_EQ(store_->MakeDir("run/ckpt").code(), StatusCode::kAlreadyExists);

  ASSERT_TRUE(WriteWhole("run/ckpt/step-1", "bytes").ok());
  EXPECT_EQ(store_->MakeDir("run/ckpt/step-1").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->RemoveDir("run/ckpt").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->RemoveDir("run/ckpt/step-1").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadAll("run/ckpt/step-1"), "bytes");
  ASSERT_TRUE(store_->Delete("run/ckpt/step-1").ok());
  Status removed = store_->RemoveDir("run/ckpt");
  EXPECT_TRUE(removed.ok()) << removed.ToString();
  StatusOr<ListResult> gone = ListOf(*store_, "run/ckpt/");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->directory_exists);
  EXPECT_FALSE(Lists(*store_, "run/", "run/ckpt/"));
  EXPECT_EQ(store_->RemoveDir("run/ckpt").code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->RemoveDir("run").ok());
}

TEST_P(ObjectWriterBehaviour, DirectoriesAreRenamedOnlyWhereTheStoreCan) {
  ASSERT_TRUE(WriteWhole("tmp-dir/a", "a").ok());
  StatusOr<ObjectInfo> moved = store_->Rename("tmp-dir", "final-dir", {});
  if (!GetParam().renames_directories) {
    EXPECT_EQ(moved.status().code(), StatusCode::kUnimplemented) << moved.status().ToString();
    EXPECT_EQ(ReadAll("tmp-dir/a"), "a");
    return;
  }
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_TRUE(moved->is_dir);
  EXPECT_EQ(ReadAll("final-dir/a"), "a");
  EXPECT_EQ(store_->Stat("tmp-dir/a").status().code(), StatusCode::kNotFound);
}

}  // namespace cairn::ufs::testing
