#include "write/spool_folders.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "common/file_util.h"

namespace cairn::write {

namespace {

namespace fs = std::filesystem;

constexpr size_t kStampMaxBytes = 256;  // "cairn spool set <16 hex digits>\n" and some slack.

struct Stamp {
  enum class Kind { kNone, kEmpty, kSet } kind = Kind::kNone;
  uint64_t set = 0;
};

std::string StampText(uint64_t set) {
  char text[64];
  std::snprintf(text, sizeof(text), "cairn spool set %016" PRIx64 "\n", set);
  return text;
}

std::string StampPath(const std::string& dir) { return dir + "/" + kSpoolSetFile; }

StatusOr<Stamp> ReadStamp(const std::string& dir) {
  const std::string path = StampPath(dir);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) return Stamp{};
  if (fd < 0) return ErrnoToStatus(errno, "open " + path);
  char text[kStampMaxBytes + 1];
  ssize_t n;
  do {
    n = ::read(fd, text, sizeof(text));
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n < 0) return ErrnoToStatus(err, "read " + path);
  if (n == 0) return Stamp{Stamp::Kind::kEmpty, 0};
  uint64_t set = 0;
  const std::string content(text, static_cast<size_t>(n));
  if (std::sscanf(content.c_str(), "cairn spool set %16" SCNx64, &set) != 1 || set == 0 ||
      content != StampText(set)) {
    return CorruptionError(path + " is not a spool folder's stamp (expected \"" +
                           StampText(1).substr(0, 16) + "<16 hex digits>\")");
  }
  return Stamp{Stamp::Kind::kSet, set};
}

using FileId = std::pair<uint64_t, uint64_t>;  // (st_dev, st_ino)

std::optional<FileId> IdOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

// What a folder is, through symlinks on the way to it and in it.
std::optional<FileId> FolderIdOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

std::string Normal(const std::string& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  std::string normal = absolute.lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

// The index in `dirs` of the folder holding `file` (by name, or by what the folder is: it may
// be spelled otherwise than when the file was journaled); dirs.size() if none.
size_t FolderOf(const std::string& file, const std::vector<std::string>& dirs,
                const std::vector<std::string>& normal_dirs,
                const std::vector<std::optional<FileId>>& dir_ids) {
  const std::string parent = Normal(fs::path(Normal(file)).parent_path().string());
  const std::optional<FileId> parent_id = FolderIdOf(parent);
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (normal_dirs[i] == parent || (parent_id && dir_ids[i] == parent_id)) return i;
  }
  return dirs.size();
}

std::string Plural(size_t n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

}  // namespace

uint64_t NewSpoolSet() {
  std::random_device rd;
  uint64_t set = 0;
  while (set == 0) set = (uint64_t{rd()} << 32) ^ rd();
  return set;
}

Status CheckSpoolFolders(const std::vector<std::string>& dirs, uint64_t spool_set,
                         const std::vector<std::string>& named) {
  if (spool_set == 0) return InvalidArgumentError("a spool set is not 0");
  std::vector<std::string> normal_dirs;
  std::vector<std::optional<FileId>> dir_ids;
  for (const std::string& dir : dirs) {
    normal_dirs.push_back(Normal(dir));
    dir_ids.push_back(FolderIdOf(normal_dirs.back()));
  }
  // The journal's files by folder; and what each of them is, where it is there.
  std::vector<std::vector<std::string>> named_in(dirs.size());
  std::set<FileId> named_ids;
  for (const std::string& file : named) {
    const size_t at = FolderOf(file, dirs, normal_dirs, dir_ids);
    if (at == dirs.size()) {
      if (!IdOf(file)) continue;  // Gone with its folder: reported lost, as any file gone.
      return FailedPreconditionError(
          "the write-back journal names the closed file " + file +
          ", which is in none of the spool folders (a cache folder was dropped from the "
          "configuration): give the worker that cache folder again, or move the file into one "
          "of its spool folders (it is found there by name); moved anywhere else, it is "
          "reported lost");
    }
    named_in[at].push_back(file);
    if (std::optional<FileId> id = IdOf(file)) named_ids.insert(*id);
  }
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string& dir = dirs[i];
    CAIRN_ASSIGN_OR_RETURN(Stamp stamp, ReadStamp(dir));
    if (stamp.kind == Stamp::Kind::kEmpty ||
        (stamp.kind == Stamp::Kind::kSet && stamp.set == spool_set)) {
      continue;
    }
    if (stamp.kind == Stamp::Kind::kNone) {
      size_t there = 0;
      for (const std::string& file : named_in[i]) there += IdOf(file).has_value() ? 1 : 0;
      if (named_in[i].empty() || there > 0) continue;  // A new folder, or one from before stamps.
      return FailedPreconditionError(
          "spool folder " + dir + " has no stamp (" + kSpoolSetFile + ") and none of the " +
          Plural(named_in[i].size(), "closed file") +
          " the write-back journal names in it is there, such as " + named_in[i].front() +
          ": is its disk mounted? If those files are lost for good, create an empty " +
          StampPath(dir) + " and start again (they are then reported lost)");
    }
    // Stamped by another journal: files of it that this one does not name belong to that one.
    std::error_code ec;
    size_t foreign = 0;
    std::string example;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(kSpoolFilePrefix, 0) != 0) continue;
      const std::optional<FileId> id = IdOf(entry.path().string());
      if (id && named_ids.count(*id) != 0) continue;
      if (foreign++ == 0) example = entry.path().string();
    }
    if (ec) return IoError("cannot list spool folder " + dir + ": " + ec.message());
    if (foreign > 0) {
      return FailedPreconditionError(
          "spool folder " + dir + " belongs to another write-back journal (its stamp says " +
          StampText(stamp.set).substr(16, 16) + ", this journal's set is " +
          StampText(spool_set).substr(16, 16) + ") and holds " + Plural(foreign, "spool file") +
          " this journal does not name, such as " + example +
          ": the journal that names them is not the one in use (its disk, the first cache "
          "folder's, may not be mounted, or it was moved or deleted). If they are not needed, "
          "empty " +
          StampPath(dir) + " and start again (they are swept)");
    }
  }
  return Status::Ok();
}

Status StampSpoolFolders(const std::vector<std::string>& dirs, uint64_t spool_set) {
  if (spool_set == 0) return InvalidArgumentError("a spool set is not 0");
  for (const std::string& dir : dirs) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return IoError("cannot create spool folder " + dir + ": " + ec.message());
    StatusOr<Stamp> stamp = ReadStamp(dir);
    if (stamp.ok() && stamp->kind == Stamp::Kind::kSet && stamp->set == spool_set) continue;
    const std::string path = StampPath(dir);
    CAIRN_RETURN_IF_ERROR(WriteNewFile(path, StampText(spool_set), 0600, /*force=*/true));
    CAIRN_RETURN_IF_ERROR(SyncFolderOf(path));
  }
  return Status::Ok();
}

}  // namespace cairn::write
