// LocalUnderStorage::List: S3-style listing of a folder tree (see local_ufs.h and ufs_keys.h).
//
// Each page reads the folders it needs once, sorts their entries by key (a folder "a" sorts as
// "a/", so that a depth-first walk visits keys in global byte order), skips whole subtrees that
// sort before the continuation token, and stats only the files that land on the page.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "ufs/local_stat.h"
#include "ufs/local_ufs.h"
#include "ufs/ufs_keys.h"

namespace cairn::ufs {
namespace {

struct Entry {
  std::string name;
  bool is_dir = false;
  bool is_link = false;  // Resolved through RootDir::OpenBeneath when stat'ed.
  std::string sort_key;  // name, plus '/' for folders.
};

class TreeWalker {
 public:
  TreeWalker(const RootDir& root, const ListOptions& options, ListPageBuilder& builder)
      : root_(root),
        token_(options.continuation_token),
        one_level_(options.delimiter == "/"),
        builder_(builder) {}

  // Feeds the builder with the entries of folder `dir_key` ("" or "a/b/") whose names start
  // with `name_prefix`, recursing unless listing one level. Stops early once the page is full.
  Status Walk(const std::string& dir_key, std::string_view name_prefix) {
    std::string rel = dir_key.empty() ? "" : dir_key.substr(0, dir_key.size() - 1);
    StatusOr<UniqueFd> dir = root_.OpenBeneath(rel, O_RDONLY | O_DIRECTORY);
    if (!dir.ok()) {
      // A prefix without a folder lists as empty; a subfolder that vanished mid-walk is skipped.
      if (dir.status().code() == StatusCode::kNotFound) return Status::Ok();
      // Anything else (an unreadable folder) fails the listing rather than silently hiding
      // part of the tree from the caller.
      return dir.status().WithContext("list " + root_.path() + "/" + rel);
    }
    struct stat dst;
    if (::fstat(dir->get(), &dst) != 0) return ErrnoToStatus(errno, "stat folder " + rel);
    std::pair<dev_t, ino_t> id{dst.st_dev, dst.st_ino};
    if (std::find(ancestors_.begin(), ancestors_.end(), id) != ancestors_.end()) {
      return Status::Ok();  // A symlink loop back to a folder on the current path.
    }
    CAIRN_ASSIGN_OR_RETURN(std::vector<Entry> entries, ReadEntries(dir->get(), rel, name_prefix));
    ancestors_.push_back(id);
    Status st = Visit(dir->get(), dir_key, rel, entries);
    ancestors_.pop_back();
    return st;
  }

 private:
  Status Visit(int dirfd, const std::string& dir_key, const std::string& rel,
               const std::vector<Entry>& entries) {
    for (const Entry& e : entries) {
      if (e.is_dir) {
        std::string sub = dir_key + e.name + "/";
        // Every key below `sub` sorts before the token: the previous pages covered them.
        if (!token_.empty() && sub < token_ && !std::string_view(token_).starts_with(sub)) {
          continue;
        }
        if (one_level_) {
          if (builder_.AddPrefix(sub) == ListPageBuilder::Verdict::kFull) return Status::Ok();
          continue;
        }
        CAIRN_RETURN_IF_ERROR(Walk(sub, ""));
        if (builder_.full()) return Status::Ok();
        continue;
      }
      std::string key = dir_key + e.name;
      if (!token_.empty() && key <= token_) continue;
      auto stat = [&]() -> std::optional<ObjectInfo> { return StatFile(dirfd, rel, e); };
      if (builder_.AddObject(key, stat) == ListPageBuilder::Verdict::kFull) return Status::Ok();
    }
    return Status::Ok();
  }

  std::optional<ObjectInfo> StatFile(int dirfd, const std::string& rel, const Entry& e) {
    struct stat st;
    if (e.is_link) {
      StatusOr<UniqueFd> fd = root_.OpenBeneath(Join(rel, e.name), O_PATH);
      if (!fd.ok() || ::fstat(fd->get(), &st) != 0) return std::nullopt;
    } else if (::fstatat(dirfd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return std::nullopt;
    }
    if (!S_ISREG(st.st_mode)) return std::nullopt;
    return internal::LocalInfoFromStat(st);
  }

  static std::string Join(const std::string& rel, const std::string& name) {
    return rel.empty() ? name : rel + "/" + name;
  }

  // Reads, classifies and sorts the folder's entries (temp files and special files dropped).
  StatusOr<std::vector<Entry>> ReadEntries(int dirfd, const std::string& rel,
                                           std::string_view name_prefix) {
    int dup_fd = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) return ErrnoToStatus(errno, "dup folder handle");
    DIR* d = ::fdopendir(dup_fd);
    if (d == nullptr) {
      int err = errno;
      ::close(dup_fd);
      return ErrnoToStatus(err, "opendir " + root_.path() + "/" + rel);
    }
    std::vector<Entry> entries;
    Status status;
    while (true) {
      errno = 0;
      struct dirent* de = ::readdir(d);
      if (de == nullptr) {
        if (errno != 0) status = ErrnoToStatus(errno, "readdir " + root_.path() + "/" + rel);
        break;
      }
      std::string_view name(de->d_name);
      if (name == "." || name == ".." || !name.starts_with(name_prefix) ||
          name.starts_with(kLocalTempPrefix)) {
        continue;
      }
      unsigned char type = de->d_type;
      if (type == DT_UNKNOWN) {
        struct stat st;
        if (::fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        type = S_ISDIR(st.st_mode)   ? DT_DIR
               : S_ISREG(st.st_mode) ? DT_REG
               : S_ISLNK(st.st_mode) ? DT_LNK
                                     : DT_UNKNOWN;
      }
      Entry e;
      e.name = std::string(name);
      if (type == DT_LNK) {
        // Classified by what it points at, provided that stays inside the root.
        StatusOr<UniqueFd> fd = root_.OpenBeneath(Join(rel, e.name), O_PATH);
        struct stat st;
        if (!fd.ok() || ::fstat(fd->get(), &st) != 0) continue;
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) continue;
        e.is_dir = S_ISDIR(st.st_mode);
        e.is_link = true;
      } else if (type == DT_DIR) {
        e.is_dir = true;
      } else if (type != DT_REG) {
        continue;  // FIFOs, sockets, devices: never objects.
      }
      e.sort_key = e.is_dir ? e.name + "/" : e.name;
      entries.push_back(std::move(e));
    }
    ::closedir(d);
    if (!status.ok()) return status;
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.sort_key < b.sort_key; });
    return entries;
  }

  const RootDir& root_;
  const std::string& token_;
  const bool one_level_;
  ListPageBuilder& builder_;
  std::vector<std::pair<dev_t, ino_t>> ancestors_;  // Folders on the current walk path.
};

}  // namespace

StatusOr<ListResult> LocalUnderStorage::List(const ListOptions& options) {
  CAIRN_RETURN_IF_ERROR(ValidatePortablePrefix(options.prefix));
  CAIRN_ASSIGN_OR_RETURN(int page_size, EffectivePageSize(options));
  const std::string& prefix = options.prefix;
  size_t slash = prefix.rfind('/');
  std::string dir_key = slash == std::string::npos ? "" : prefix.substr(0, slash + 1);
  std::string_view name_prefix = std::string_view(prefix).substr(dir_key.size());
  ListPageBuilder builder(options, page_size);
  TreeWalker walker(*root_, options, builder);
  CAIRN_RETURN_IF_ERROR(walker.Walk(dir_key, name_prefix));
  ListResult result = std::move(builder).Finish();
  if (name_prefix.empty() && !dir_key.empty() && result.objects.empty() &&
      result.common_prefixes.empty()) {
    // An empty page: say whether the folder itself exists (an empty folder is a directory).
    std::string_view folder = std::string_view(dir_key).substr(0, dir_key.size() - 1);
    result.directory_exists = root_->OpenBeneath(folder, O_RDONLY | O_DIRECTORY).ok();
  }
  return result;
}

}  // namespace cairn::ufs
