// Real-mount tests of the FUSE data path: listing, attributes, reads, errors. Every check goes
// through the kernel with plain POSIX calls or shell tools, as an application would.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "fuse/fuse_test_fixture.h"
#include "fuse/readahead.h"

namespace cairn::fuse::testing {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// Reads exactly `len` bytes at `off` with pread, looping over short reads.
std::string PreadAll(int fd, uint64_t off, size_t len) {
  std::string out(len, '\0');
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, out.data() + done, len - done, static_cast<off_t>(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

class FuseDataTest : public FuseMountTest {
 protected:
  void PopulateTree() {
    Put("/empty", "");
    Put("/one", "x", 1'600'000'000'500'000'000);
    Put("/dir/small.txt", "hello\n");
    Put("/dir/sub/page.bin", TestBytes(4097, 1));
    Put("/dir/sub/big.bin", TestBytes(3 * kMiB + 123, 2));
    Put("/with space/ünïcødé 名前.txt", TestBytes(1000, 3));
    ASSERT_TRUE(client_->AddDir("/emptydir").ok());
  }
};

TEST_F(FuseDataTest, FindSeesEveryEntryWithTypeAndSize) {
  PopulateTree();
  StartMount();
  CommandResult find =
      RunCommand("find " + ShellQuote(mnt_) + " -mindepth 1 -printf '%y %s %P\\n'");
  ASSERT_EQ(find.exit_code, 0) << find.output;
  std::vector<std::string> got = Lines(find.output);
  std::sort(got.begin(), got.end());
  std::vector<std::string> want = {"d 0 dir",        "d 0 dir/sub", "d 0 emptydir",
                                   "d 0 with space", "f 0 empty",   "f 1 one"};
  for (const auto& [path, bytes] : files_) {
    if (path == "/empty" || path == "/one") continue;
    want.push_back("f " + std::to_string(bytes.size()) + " " + path.substr(1));
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST_F(FuseDataTest, LsLongRecursiveShowsReadOnlyModes) {
  PopulateTree();
  StartMount();
  CommandResult ls = RunCommand("LC_ALL=C ls -lRn " + ShellQuote(mnt_));
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  const std::string uid = std::to_string(::getuid());
  int files = 0, dirs = 0;
  for (const std::string& line : Lines(ls.output)) {
    if (line.rfind("-r--r--r--", 0) == 0) files++;
    if (line.rfind("dr-xr-xr-x", 0) == 0) dirs++;
    if (line.rfind("-", 0) == 0 || line.rfind("d", 0) == 0) {
      EXPECT_NE(line.find(" " + uid + " "), std::string::npos) << line;
    }
  }
  EXPECT_EQ(files, static_cast<int>(files_.size()));
  EXPECT_EQ(dirs, 4);
  EXPECT_NE(ls.output.find("ünïcødé 名前.txt"), std::string::npos);
}

TEST_F(FuseDataTest, TenThousandEntryDirectoryListsEachNameExactlyOnce) {
  std::set<std::string> names;
  for (int i = 0; i < 10000; ++i) {
    char name[64];
    switch (i % 3) {
      case 0:
        std::snprintf(name, sizeof(name), "file %05d with space", i);
        break;
      case 1:
        std::snprintf(name, sizeof(name), "fïlé_%05d_日本", i);
        break;
      default:
        std::snprintf(name, sizeof(name), "f%05d", i);
        break;
    }
    names.insert(name);
    ASSERT_TRUE(client_->PutFile(std::string("/big/") + name, std::to_string(i)).ok());
  }
  StartMount();

  // The directory stream, as readdir(3) sees it.
  const uint64_t lists_before = client_->counters().list_calls;
  DIR* dir = ::opendir(P("/big").c_str());
  ASSERT_NE(dir, nullptr) << std::strerror(errno);
  std::vector<std::string> order;
  std::vector<long> cookies;  // cookies[i]: telldir() right after reading order[i].
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    order.push_back(name);
    cookies.push_back(::telldir(dir));
  }
  EXPECT_EQ(order.size(), names.size());
  EXPECT_EQ(std::set<std::string>(order.begin(), order.end()), names);
  // Streamed page by page (10 pages of 1024), not re-listed per kernel readdir batch.
  const uint64_t lists = client_->counters().list_calls - lists_before;
  EXPECT_LE(lists, 12u) << "ListDir calls for one pass";
  EXPECT_GE(lists, 10u);

  // Seeking to a cookie, backwards and forwards, resumes right after the entry it was taken at.
  for (size_t i : {size_t{7000}, size_t{1500}, size_t{9998}, size_t{3}}) {
    ::seekdir(dir, cookies[i]);
    dirent* next = ::readdir(dir);
    ASSERT_NE(next, nullptr) << i;
    EXPECT_EQ(std::string(next->d_name), order[i + 1]) << i;
  }
  ::rewinddir(dir);
  size_t count = 0;
  while (dirent* e = ::readdir(dir)) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") count++;
  }
  EXPECT_EQ(count, names.size());
  ::closedir(dir);

  // And through ls (sorted, one per line) and ls -l (readdirplus + stat of every entry).
  CommandResult ls = RunCommand("LC_ALL=C ls -1 " + ShellQuote(P("/big")));
  ASSERT_EQ(ls.exit_code, 0);
  std::vector<std::string> listed = Lines(ls.output);
  EXPECT_EQ(listed.size(), names.size());
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), names);
  CommandResult ls_long = RunCommand("LC_ALL=C ls -l " + ShellQuote(P("/big")) + " | wc -l");
  EXPECT_EQ(std::stoi(ls_long.output), 10001);  // Entries plus the "total" line.
  CommandResult find = RunCommand("find " + ShellQuote(P("/big")) + " -type f | wc -l");
  EXPECT_EQ(std::stoi(find.output), 10000);
}

TEST_F(FuseDataTest, StatReportsSizesModesOwnerAndTimes) {
  PopulateTree();
  StartMount();
  struct stat st;
  ASSERT_EQ(::stat(P("/dir/sub/big.bin").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  EXPECT_EQ(static_cast<size_t>(st.st_size), 3 * kMiB + 123);
  EXPECT_EQ(st.st_blocks, static_cast<blkcnt_t>((3 * kMiB + 123 + 511) / 512));
  EXPECT_EQ(st.st_uid, ::getuid());
  EXPECT_EQ(st.st_gid, ::getgid());
  const ino_t big_ino = st.st_ino;

  ASSERT_EQ(::stat(P("/one").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1);
  EXPECT_EQ(st.st_mtim.tv_sec, 1'600'000'000);
  EXPECT_EQ(st.st_mtim.tv_nsec, 500'000'000);
  ASSERT_EQ(::stat(P("/empty").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(st.st_blocks, 0);

  ASSERT_EQ(::stat(P("/dir").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0555u);
  ASSERT_EQ(::stat(mnt_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_ino, 1u);

  // Inode numbers are stable while known, distinct between paths, and match readdir's d_ino.
  ASSERT_EQ(::stat(P("/dir/sub/big.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, big_ino);
  ASSERT_EQ(::stat(P("/dir/sub/page.bin").c_str(), &st), 0);
  EXPECT_NE(st.st_ino, big_ino);
  DIR* dir = ::opendir(P("/dir/sub").c_str());
  ASSERT_NE(dir, nullptr);
  bool found = false;
  while (dirent* e = ::readdir(dir)) {
    if (std::string(e->d_name) == "big.bin") {
      found = true;
      EXPECT_EQ(e->d_ino, big_ino);
      EXPECT_EQ(e->d_type, DT_REG);
    }
  }
  ::closedir(dir);
  EXPECT_TRUE(found);
}

TEST_F(FuseDataTest, CopiedTreeIsByteIdentical) {
  PopulateTree();
  StartMount();
  const std::string copy = dir_ + "/copy";
  CommandResult cp = RunCommand("cp -r " + ShellQuote(mnt_) + " " + ShellQuote(copy) + " 2>&1");
  ASSERT_EQ(cp.exit_code, 0) << cp.output;
  for (const auto& [path, bytes] : files_) {
    int err = 0;
    EXPECT_TRUE(SameBytes(ReadWholeFile(copy + path, &err), bytes)) << path;
    EXPECT_EQ(err, 0) << path;
    EXPECT_TRUE(SameBytes(ReadWholeFile(P(path), &err), bytes)) << path;
  }
  CommandResult cat = RunCommand("cat " + ShellQuote(P("/dir/sub/big.bin")) + " | cmp - " +
                                 ShellQuote(copy + "/dir/sub/big.bin"));
  EXPECT_EQ(cat.exit_code, 0);
}

TEST_F(FuseDataTest, ZeroAndOneByteFiles) {
  PopulateTree();
  StartMount();
  const int fd0 = ::open(P("/empty").c_str(), O_RDONLY);
  ASSERT_GE(fd0, 0);
  char buf[16];
  EXPECT_EQ(::read(fd0, buf, sizeof(buf)), 0);
  EXPECT_EQ(::pread(fd0, buf, sizeof(buf), 100), 0);
  ::close(fd0);
  const int fd1 = ::open(P("/one").c_str(), O_RDONLY);
  ASSERT_GE(fd1, 0);
  EXPECT_EQ(::read(fd1, buf, sizeof(buf)), 1);
  EXPECT_EQ(buf[0], 'x');
  EXPECT_EQ(::read(fd1, buf, sizeof(buf)), 0);
  EXPECT_EQ(::pread(fd1, buf, 1, 1), 0);
  ::close(fd1);
}

TEST_F(FuseDataTest, RandomOffsetReadsAcrossMiBBoundaries) {
  const std::string bytes = TestBytes(8 * kMiB + 77, 9);
  Put("/large.bin", bytes);
  StartMount();
  std::mt19937_64 rng(42);
  for (int flags : {O_RDONLY, O_RDONLY | O_DIRECT}) {
    const int fd = ::open(P("/large.bin").c_str(), flags);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    for (int i = 0; i < 150; ++i) {
      uint64_t off;
      if (i % 3 == 0) {
        // Straddle a MiB boundary.
        off = (1 + rng() % 8) * kMiB - rng() % 4096;
      } else {
        off = rng() % bytes.size();
      }
      const size_t len = 1 + rng() % (2 * kMiB + 1000);
      const size_t want = std::min<uint64_t>(len, bytes.size() - off);
      ASSERT_TRUE(SameBytes(PreadAll(fd, off, len), bytes.substr(off, want)))
          << "off " << off << " len " << len;
    }
    // A read larger than 1 MiB completes in one syscall (the kernel splits it into requests).
    // Page-aligned, so that the kernel's 256-page limit per request is not cut short by a
    // buffer that starts mid-page.
    constexpr size_t kBig = 1536 * 1024;
    std::unique_ptr<char, decltype(&std::free)> big(
        static_cast<char*>(std::aligned_alloc(4096, kBig)), &std::free);
    const ssize_t n = ::pread(fd, big.get(), kBig, 3 * kMiB + 5);
    ASSERT_EQ(n, static_cast<ssize_t>(kBig));
    if (flags & O_DIRECT) {
      // The kernel forwarded it in 1 MiB requests: max_read/max_pages were negotiated.
      EXPECT_EQ(client_->counters().max_read_span, kMiB);
    }
    EXPECT_TRUE(SameBytes(std::string(big.get(), kBig), bytes.substr(3 * kMiB + 5, kBig)));
    // Reads at and past the end.
    EXPECT_TRUE(SameBytes(PreadAll(fd, bytes.size() - 10, 100), bytes.substr(bytes.size() - 10)));
    EXPECT_EQ(PreadAll(fd, bytes.size() + 5, 100), "");
    ::close(fd);
  }
}

// Large sequential reads need more than the kernel's 128 KiB readahead (readahead.h): the
// mount raises it at its first lookup, where it may (root).
TEST_F(FuseDataTest, FirstLookupRaisesTheKernelReadahead) {
  if (::geteuid() != 0) GTEST_SKIP() << "setting a mount's readahead needs root";
  Put("/f", "x");
  FuseOptions options;
  options.readahead_kb = 2048;
  StartMount(options);
  StatusOr<std::string> device = MountDevice(mnt_);
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  const std::string sysfs = "/sys/class/bdi/" + *device + "/read_ahead_kb";
  if (::access(sysfs.c_str(), W_OK) != 0) GTEST_SKIP() << sysfs << " is not writable here";
  struct stat st;
  ASSERT_EQ(::stat(P("/f").c_str(), &st), 0);
  std::ifstream in(sysfs);
  std::string kb;
  in >> kb;
  EXPECT_EQ(kb, "2048");
}

TEST_F(FuseDataTest, SixteenConcurrentReaders) {
  std::vector<std::string> paths;
  for (int f = 0; f < 4; ++f) {
    paths.push_back("/c/file" + std::to_string(f));
    Put(paths.back(), TestBytes(2 * kMiB + 1000 * f, 100 + f));
  }
  FuseOptions options;
  options.max_threads = 16;
  StartMount(options);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      const std::string& path = paths[t % paths.size()];
      const std::string& bytes = files_[path];
      const int flags = (t % 2 == 0) ? O_RDONLY : (O_RDONLY | O_DIRECT);
      const int fd = ::open(P(path).c_str(), flags);
      if (fd < 0) {
        mismatches++;
        return;
      }
      for (int i = 0; i < 40; ++i) {
        const uint64_t off = rng() % bytes.size();
        const size_t len = 1 + rng() % (512 * 1024);
        if (PreadAll(fd, off, len) != bytes.substr(off, len)) mismatches++;
      }
      ::close(fd);
      int err = 0;
      if (ReadWholeFile(P(path), &err) != bytes || err != 0) mismatches++;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(FuseDataTest, EveryWriteIsRefusedWithErofs) {
  PopulateTree();
  StartMount();
  auto expect_erofs = [](int rc, const char* what) {
    EXPECT_EQ(rc, -1) << what;
    EXPECT_EQ(errno, EROFS) << what << ": " << std::strerror(errno);
  };
  expect_erofs(::open(P("/one").c_str(), O_WRONLY), "open O_WRONLY");
  expect_erofs(::open(P("/one").c_str(), O_RDWR), "open O_RDWR");
  expect_erofs(::open(P("/one").c_str(), O_RDONLY | O_TRUNC), "open O_TRUNC");
  expect_erofs(::open(P("/new").c_str(), O_WRONLY | O_CREAT, 0644), "create");
  expect_erofs(::mkdir(P("/newdir").c_str(), 0755), "mkdir");
  expect_erofs(::unlink(P("/one").c_str()), "unlink");
  expect_erofs(::rmdir(P("/emptydir").c_str()), "rmdir");
  expect_erofs(::rename(P("/one").c_str(), P("/two").c_str()), "rename");
  expect_erofs(::symlink("one", P("/link").c_str()), "symlink");
  expect_erofs(::link(P("/one").c_str(), P("/hard").c_str()), "link");
  expect_erofs(::truncate(P("/one").c_str(), 0), "truncate");
  expect_erofs(::chmod(P("/one").c_str(), 0777), "chmod");
  expect_erofs(::utimensat(AT_FDCWD, P("/one").c_str(), nullptr, 0), "utimensat");
  expect_erofs(::setxattr(P("/one").c_str(), "user.k", "v", 1, 0), "setxattr");
  CommandResult touch = RunCommand("touch " + ShellQuote(P("/one")) + " 2>&1");
  EXPECT_NE(touch.exit_code, 0);
  EXPECT_NE(touch.output.find("Read-only file system"), std::string::npos) << touch.output;
  // Nothing changed underneath.
  int err = 0;
  EXPECT_EQ(ReadWholeFile(P("/one"), &err), "x");
}

TEST_F(FuseDataTest, MissingPathsAndXattrs) {
  PopulateTree();
  StartMount();
  struct stat st;
  EXPECT_EQ(::stat(P("/nope").c_str(), &st), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::open(P("/dir/nope.txt").c_str(), O_RDONLY), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::opendir(P("/nope/deeper").c_str()), nullptr);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::stat(P("/one/child").c_str(), &st), -1);
  EXPECT_EQ(errno, ENOTDIR);
  char value[16];
  EXPECT_EQ(::getxattr(P("/one").c_str(), "user.k", value, sizeof(value)), -1);
  EXPECT_EQ(errno, ENOTSUP);
  struct statvfs vfs;
  ASSERT_EQ(::statvfs(mnt_.c_str(), &vfs), 0);
  EXPECT_EQ(vfs.f_bsize, 4096u);
  EXPECT_EQ(vfs.f_namemax, 255u);
  EXPECT_GT(vfs.f_blocks, 1ull << 30);
  EXPECT_NE(vfs.f_flag & ST_RDONLY, 0u);
}

TEST_F(FuseDataTest, ClientErrorsMapToErrno) {
  PopulateTree();
  Put("/err/denied", "secret");
  Put("/err/flaky", "data");
  Put("/err/bad", "data");
  client_->InjectError("/err/denied", PermissionDeniedError("no"));
  client_->InjectError("/err/flaky", UnavailableError("all workers and the source are down"));
  client_->InjectError("/err/bad", InvalidArgumentError("bad path"));
  StartMount();
  struct stat st;
  EXPECT_EQ(::stat(P("/err/denied").c_str(), &st), -1);
  EXPECT_EQ(errno, EACCES);
  EXPECT_EQ(::stat(P("/err/flaky").c_str(), &st), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(::stat(P("/err/bad").c_str(), &st), -1);
  EXPECT_EQ(errno, EINVAL);

  // A read that fails after a successful open: EIO, and the file works again once healthy.
  const int fd = ::open(P("/dir/sub/big.bin").c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0);
  client_->InjectError("/dir/sub/big.bin", DeadlineExceededError("slow worker"));
  char buf[4096];
  EXPECT_EQ(::pread(fd, buf, sizeof(buf), 0), -1);
  EXPECT_EQ(errno, EIO);
  client_->InjectError("/dir/sub/big.bin", Status::Ok());
  EXPECT_EQ(::pread(fd, buf, sizeof(buf), 0), static_cast<ssize_t>(sizeof(buf)));
  ::close(fd);
}

}  // namespace
}  // namespace cairn::fuse::testing
