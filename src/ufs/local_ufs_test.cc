// The under-storage contract, run against the local folder store and the in-memory fake (so the
// fake other modules test with behaves like the real thing), plus local-only behaviour.
#include "ufs/local_ufs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include "ufs/memory_ufs.h"

namespace cairn::ufs {
namespace {

namespace fs = std::filesystem;

std::span<const char> Bytes(const std::string& s) { return {s.data(), s.size()}; }

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "cairn-ufs-XXXXXX").string();
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Backend {
  std::string name;
  std::function<std::shared_ptr<UnderStorage>(const std::string& dir)> open;
};

class UfsContractTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    ufs_ = GetParam().open(dir_.path());
    ASSERT_NE(ufs_, nullptr);
  }

  void Put(const std::string& key, const std::string& data) {
    Status st = ufs_->Write(key, Bytes(data));
    ASSERT_TRUE(st.ok()) << key << ": " << st.ToString();
  }

  StatusOr<std::string> Read(const std::string& key, size_t len, uint64_t offset = 0,
                             std::string_view version = "") {
    std::string buf(len, '\0');
    auto n = ufs_->Read(key, version, offset, std::span<char>(buf.data(), buf.size()));
    if (!n.ok()) return n.status();
    buf.resize(*n);
    return buf;
  }

  // All items of a paginated listing, in order: objects as keys, prefixes ending in '/'.
  std::vector<std::string> ListAll(ListOptions o, int* pages = nullptr) {
    std::vector<std::string> items;
    int n = 0;
    for (; n < 10000; ++n) {
      auto page = ufs_->List(o);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      std::vector<std::string> page_items;
      for (const auto& obj : page->objects) page_items.push_back(obj.key);
      for (const auto& p : page->common_prefixes) page_items.push_back(p);
      std::sort(page_items.begin(), page_items.end());
      EXPECT_LE(static_cast<int>(page_items.size()), o.max_keys);
      items.insert(items.end(), page_items.begin(), page_items.end());
      if (page->next_token.empty()) break;
      o.continuation_token = page->next_token;
    }
    if (pages != nullptr) *pages = n + 1;
    return items;
  }

  TempDir dir_;
  std::shared_ptr<UnderStorage> ufs_;
};

TEST_P(UfsContractTest, WriteStatReadAtOffsets) {
  Put("a/b.txt", "hello world");
  auto info = ufs_->Stat("a/b.txt");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->key, "a/b.txt");
  EXPECT_EQ(info->size, 11u);
  EXPECT_FALSE(info->version.empty());
  EXPECT_FALSE(info->is_dir);
  EXPECT_EQ(*Read("a/b.txt", 11, 0, info->version), "hello world");
  EXPECT_EQ(*Read("a/b.txt", 100, 6), "world");
  EXPECT_EQ(*Read("a/b.txt", 4, 11), "");
  EXPECT_EQ(*Read("a/b.txt", 4, 1 << 30), "");
  EXPECT_EQ(*Read("a/b.txt", 0, 0), "");
}

TEST_P(UfsContractTest, MissingObjectsAndFoldersAreNotFound) {
  Put("dir/child", "x");
  EXPECT_EQ(ufs_->Stat("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ufs_->Stat("dir").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ufs_->Stat("dir/child/deeper").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Read("nope", 4).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Read("dir", 4).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ufs_->Delete("nope").code(), StatusCode::kNotFound);
  EXPECT_EQ(ufs_->Delete("dir").code(), StatusCode::kNotFound);
}

TEST_P(UfsContractTest, OverwriteChangesTheVersionAndStaleReadsFail) {
  Put("obj", "version one");
  auto v1 = ufs_->Stat("obj");
  ASSERT_TRUE(v1.ok());
  Put("obj", "version two, longer");
  auto v2 = ufs_->Stat("obj");
  ASSERT_TRUE(v2.ok());
  EXPECT_NE(v1->version, v2->version);
  EXPECT_EQ(Read("obj", 5, 0, v1->version).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(*Read("obj", 100, 0, v2->version), "version two, longer");
}

TEST_P(UfsContractTest, RejectsKeysThatCouldEscapeTheRoot) {
  for (std::string key : std::vector<std::string>{"../x", "/etc/passwd", "a//b", "a/./b",
                                                  "a/../../x", "", "a/", std::string("a\0b", 3)}) {
    SCOPED_TRACE("'" + key + "'");
    EXPECT_EQ(ufs_->Stat(key).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(Read(key, 4).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ufs_->Write(key, Bytes("x")).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ufs_->Delete(key).code(), StatusCode::kInvalidArgument);
  }
  ListOptions o;
  o.prefix = "../";
  EXPECT_EQ(ufs_->List(o).status().code(), StatusCode::kInvalidArgument);
  o.prefix = "";
  o.max_keys = 0;
  EXPECT_EQ(ufs_->List(o).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(UfsContractTest, UnicodeAndSpacesInNames) {
  const std::string key = "dir with space/naïve ü 日本 +&=%20.txt";
  Put(key, "unicode");
  auto info = ufs_->Stat(key);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(*Read(key, 100), "unicode");
  ListOptions o;
  o.prefix = "dir with space/";
  EXPECT_EQ(ListAll(o), (std::vector<std::string>{key}));
}

TEST_P(UfsContractTest, ListsOneLevelRecursivelyAndByPartialPrefix) {
  for (std::string k : {"a.txt", "dir/x", "dir/y/z", "dir2/q", "e"}) Put(k, k);
  ListOptions one;
  EXPECT_EQ(ListAll(one), (std::vector<std::string>{"a.txt", "dir/", "dir2/", "e"}));
  ListOptions rec;
  rec.delimiter = "";
  EXPECT_EQ(ListAll(rec), (std::vector<std::string>{"a.txt", "dir/x", "dir/y/z", "dir2/q", "e"}));
  ListOptions partial;
  partial.prefix = "dir";
  EXPECT_EQ(ListAll(partial), (std::vector<std::string>{"dir/", "dir2/"}));
  ListOptions inside;
  inside.prefix = "dir/";
  EXPECT_EQ(ListAll(inside), (std::vector<std::string>{"dir/x", "dir/y/"}));
  ListOptions missing;
  missing.prefix = "nothing/here/";
  EXPECT_TRUE(ListAll(missing).empty());

  auto page = ufs_->List(inside);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].size, 5u);
  EXPECT_FALSE(page->objects[0].version.empty());
  EXPECT_EQ(page->objects[0].version, ufs_->Stat("dir/x")->version);
}

TEST_P(UfsContractTest, PaginationMatchesAnUnpaginatedListing) {
  std::vector<std::string> keys;
  for (int d = 0; d < 4; ++d) {
    for (int f = 0; f < 5; ++f)
      keys.push_back("t/d" + std::to_string(d) + "/f" + std::to_string(f));
    keys.push_back("t/d" + std::to_string(d) + "/sub/deep/g");
    keys.push_back("t/file" + std::to_string(d));
  }
  for (const auto& k : keys) Put(k, "x");
  std::sort(keys.begin(), keys.end());
  for (int page_size : {1, 3, 7, 1000}) {
    SCOPED_TRACE(page_size);
    ListOptions rec;
    rec.prefix = "t/";
    rec.delimiter = "";
    rec.max_keys = page_size;
    int pages = 0;
    EXPECT_EQ(ListAll(rec, &pages), keys);
    EXPECT_EQ(pages, (static_cast<int>(keys.size()) + page_size - 1) / page_size);
    ListOptions one;
    one.prefix = "t/d1/";
    one.max_keys = page_size;
    EXPECT_EQ(ListAll(one), (std::vector<std::string>{"t/d1/f0", "t/d1/f1", "t/d1/f2", "t/d1/f3",
                                                      "t/d1/f4", "t/d1/sub/"}));
  }
}

TEST_P(UfsContractTest, DeleteRemovesOnlyTheObject) {
  Put("d/a", "1");
  Put("d/b", "2");
  EXPECT_TRUE(ufs_->Delete("d/a").ok());
  EXPECT_EQ(ufs_->Stat("d/a").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(ufs_->Stat("d/b").ok());
  EXPECT_EQ(ufs_->Delete("d/a").code(), StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(
    Backends, UfsContractTest,
    ::testing::Values(Backend{"local",
                              [](const std::string& dir) -> std::shared_ptr<UnderStorage> {
                                auto ufs = LocalUnderStorage::Open(dir);
                                EXPECT_TRUE(ufs.ok()) << ufs.status().ToString();
                                return ufs.ok()
                                           ? std::shared_ptr<UnderStorage>(std::move(ufs).value())
                                           : nullptr;
                              }},
                      Backend{"memory",
                              [](const std::string&) -> std::shared_ptr<UnderStorage> {
                                return std::make_shared<MemoryUnderStorage>();
                              }}),
    [](const ::testing::TestParamInfo<Backend>& info) { return info.param.name; });

// --- Local-only behaviour ---

class LocalUfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ufs = LocalUnderStorage::Open(dir_.path());
    ASSERT_TRUE(ufs.ok()) << ufs.status().ToString();
    ufs_ = std::move(ufs).value();
  }
  std::string Path(const std::string& rel) const { return dir_.path() + "/" + rel; }
  void WriteRaw(const std::string& rel, const std::string& data) {
    fs::create_directories(fs::path(Path(rel)).parent_path());
    std::ofstream(Path(rel)) << data;
  }

  TempDir dir_;
  std::unique_ptr<LocalUnderStorage> ufs_;
};

TEST_F(LocalUfsTest, OpenChecksTheRoot) {
  EXPECT_EQ(LocalUnderStorage::Open(dir_.path() + "/missing").status().code(),
            StatusCode::kNotFound);
  WriteRaw("file", "x");
  EXPECT_EQ(LocalUnderStorage::Open(Path("file")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LocalUnderStorage::Open("relative/path").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ufs_->RootUri(), "file://" + dir_.path());
}

TEST_F(LocalUfsTest, VersionIsSizeAndMtimeNanos) {
  WriteRaw("f", "12345");
  struct stat st;
  ASSERT_EQ(::stat(Path("f").c_str(), &st), 0);
  int64_t mtime = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  auto info = ufs_->Stat("f");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->version, "5-" + std::to_string(mtime));
  EXPECT_EQ(info->mtime_ns, mtime);
}

TEST_F(LocalUfsTest, SymlinksNeverLeadOutOfTheRoot) {
  TempDir outside;
  std::ofstream(outside.path() + "/secret") << "top secret";
  fs::create_directory_symlink(outside.path(), Path("escape_dir"));
  fs::create_symlink(outside.path() + "/secret", Path("escape_file"));
  fs::create_symlink("../" + fs::path(outside.path()).filename().string() + "/secret",
                     Path("escape_relative"));
  for (std::string key : {"escape_dir/secret", "escape_file", "escape_relative"}) {
    SCOPED_TRACE(key);
    EXPECT_EQ(ufs_->Stat(key).status().code(), StatusCode::kPermissionDenied);
    std::string buf(20, '\0');
    auto n = ufs_->Read(key, "", 0, std::span<char>(buf.data(), buf.size()));
    EXPECT_EQ(n.status().code(), StatusCode::kPermissionDenied);
  }
  EXPECT_FALSE(ufs_->Write("escape_dir/planted", Bytes("x")).ok());
  EXPECT_FALSE(fs::exists(outside.path() + "/planted"));
  ListOptions o;
  o.delimiter = "";
  auto page = ufs_->List(o);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->objects.empty());
}

TEST_F(LocalUfsTest, SymlinksInsideTheRootWorkWhenOpenat2IsAvailable) {
  WriteRaw("real/data.bin", "payload");
  fs::create_symlink("real/data.bin", Path("alias"));
  fs::create_directory_symlink("real", Path("linkdir"));
  if (!ufs_->follows_symlinks()) {
    EXPECT_EQ(ufs_->Stat("alias").status().code(), StatusCode::kPermissionDenied);
    return;
  }
  auto info = ufs_->Stat("alias");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 7u);
  EXPECT_TRUE(ufs_->Stat("linkdir/data.bin").ok());
  ListOptions o;
  o.delimiter = "";
  auto page = ufs_->List(o);
  ASSERT_TRUE(page.ok());
  std::vector<std::string> keys;
  for (const auto& obj : page->objects) keys.push_back(obj.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"alias", "linkdir/data.bin", "real/data.bin"}));
}

TEST_F(LocalUfsTest, SymlinkLoopsDoNotHangRecursiveListing) {
  WriteRaw("a/file", "x");
  fs::create_directory_symlink("..", Path("a/up"));  // Points back at the root.
  ListOptions o;
  o.delimiter = "";
  auto page = ufs_->List(o);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "a/file");
}

TEST_F(LocalUfsTest, SpecialFilesAndTempFilesAreNotObjects) {
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0644), 0);
  WriteRaw(std::string(kLocalTempPrefix) + "abc", "partial");
  WriteRaw("real", "x");
  EXPECT_EQ(ufs_->Stat("fifo").status().code(), StatusCode::kNotFound);
  std::string buf(4, '\0');
  EXPECT_EQ(ufs_->Read("fifo", "", 0, std::span<char>(buf.data(), buf.size())).status().code(),
            StatusCode::kNotFound);
  auto page = ufs_->List(ListOptions());
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "real");
  EXPECT_EQ(ufs_->Write(std::string(kLocalTempPrefix) + "x", Bytes("x")).code(),
            StatusCode::kInvalidArgument);
}

TEST_F(LocalUfsTest, WriteCreatesParentsAndRefusesFilesAsFolders) {
  ASSERT_TRUE(ufs_->Write("new/deep/dir/obj", Bytes("data")).ok());
  EXPECT_TRUE(fs::is_regular_file(Path("new/deep/dir/obj")));
  EXPECT_EQ(ufs_->Write("new/deep/dir/obj/below", Bytes("x")).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(ufs_->Write("new/deep", Bytes("x")).code(), StatusCode::kFailedPrecondition);
  // Nothing half-written is left behind.
  for (const auto& e : fs::recursive_directory_iterator(dir_.path())) {
    EXPECT_FALSE(e.path().filename().string().starts_with(kLocalTempPrefix)) << e.path();
  }
}

TEST_F(LocalUfsTest, EmptyFoldersAreListedAsPrefixes) {
  fs::create_directories(Path("empty"));
  auto page = ufs_->List(ListOptions());
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->common_prefixes, (std::vector<std::string>{"empty/"}));
}

TEST_F(LocalUfsTest, ListsTenThousandFilesInPages) {
  fs::create_directories(Path("big"));
  for (int i = 0; i < 10000; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "big/f%05d", i);
    std::ofstream(Path(name)) << "";
  }
  ListOptions o;
  o.prefix = "big/";
  int pages = 0;
  int count = 0;
  std::string last;
  auto start = std::chrono::steady_clock::now();
  while (true) {
    auto page = ufs_->List(o);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ++pages;
    for (const auto& obj : page->objects) {
      EXPECT_GT(obj.key, last);
      last = obj.key;
      ++count;
    }
    if (page->next_token.empty()) break;
    o.continuation_token = page->next_token;
  }
  EXPECT_EQ(count, 10000);
  EXPECT_EQ(pages, 10);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST_F(LocalUfsTest, ReadDetectsARewriteWithTheSameSize) {
  WriteRaw("f", "aaaa");
  auto v1 = ufs_->Stat("f");
  ASSERT_TRUE(v1.ok());
  // Move the mtime explicitly: same size, different version.
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 678}};
  ASSERT_EQ(::utimensat(AT_FDCWD, Path("f").c_str(), times, 0), 0);
  std::string buf(4, '\0');
  auto n = ufs_->Read("f", v1->version, 0, std::span<char>(buf.data(), buf.size()));
  EXPECT_EQ(n.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace cairn::ufs
