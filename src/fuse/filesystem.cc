#include "fuse/filesystem.h"

#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdio>  // RENAME_NOREPLACE
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "fuse/errno_map.h"

namespace cairn::fuse {
namespace {

// d_ino reported by plain readdir for entries the kernel holds no reference to. Handing out a
// real number would need a reference the kernel never returns; libfuse's high-level API uses
// the same value for the same reason.
constexpr fuse_ino_t kUnknownIno = 0xffffffff;

// I/O size hint (st_blksize): large, so that cp/cat/stdio read in big chunks that map onto
// whole cache pages instead of 4 KiB syscalls.
constexpr blksize_t kPreferredIoSize = kMaxIoBytes;

// statfs figures: a read-only filesystem with no free space and a size large enough that
// nothing mistakes it for a small disk. f_namemax 255 matches what tools expect of Linux.
constexpr uint64_t kStatFsBlockSize = 4096;
constexpr uint64_t kStatFsBlocks = (1ull << 50) / kStatFsBlockSize;  // 1 PiB.
constexpr uint64_t kStatFsFiles = 1ull << 32;
constexpr unsigned long kNameMax = 255;

Filesystem* Fs(fuse_req_t req) { return static_cast<Filesystem*>(fuse_req_userdata(req)); }

timespec TimespecFromNanos(int64_t ns) {
  int64_t sec = ns / 1'000'000'000;
  int64_t rem = ns % 1'000'000'000;
  if (rem < 0) {  // Floor, so pre-1970 times keep 0 <= tv_nsec < 1e9.
    rem += 1'000'000'000;
    sec -= 1;
  }
  return timespec{.tv_sec = static_cast<time_t>(sec), .tv_nsec = static_cast<long>(rem)};
}

// What lookup and getattr say of a file this mount has open for writing: the source's answer
// with the size written so far, or (not committed yet) a new file of that size, now.
StatusOr<FileInfo> WritingInfo(std::string name, uint64_t size, const StatusOr<FileInfo>& stat) {
  FileInfo info;
  if (stat.ok()) {
    info = *stat;
  } else {
    info.name = std::move(name);
    info.mtime_ns = Clock::Real()->WallNanos();
  }
  info.is_dir = false;
  info.size = size;
  return info;
}

}  // namespace

struct stat AttrFromInfo(uint64_t ino, const FileInfo& info, const FilesystemConfig& config,
                         bool writable) {
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  st.st_ino = ino;
  const mode_t write_bits = writable ? 0200 : 0;
  st.st_mode = info.is_dir ? (S_IFDIR | 0555 | write_bits) : (S_IFREG | 0444 | write_bits);
  // Directories report 1 link too: the conventional "2 + subdirectories" would need a listing
  // per stat, and 1 tells find/fts that the count is unknown, so they never prune on it.
  st.st_nlink = 1;
  st.st_uid = config.uid;
  st.st_gid = config.gid;
  st.st_size = info.is_dir ? 0 : static_cast<off_t>(info.size);
  st.st_blksize = kPreferredIoSize;
  st.st_blocks = static_cast<blkcnt_t>((info.is_dir ? 0 : info.size + 511) / 512);
  st.st_mtim = TimespecFromNanos(info.mtime_ns);
  st.st_atim = st.st_mtim;
  st.st_ctim = st.st_mtim;
  return st;
}

std::string JoinPath(const std::string& dir, std::string_view name) {
  std::string path = dir;
  if (path.empty() || path.back() != '/') path += '/';
  path += name;
  return path;
}

Filesystem::Filesystem(Client* client, FilesystemConfig config)
    : client_(client), config_(config) {}

Filesystem::~Filesystem() {
  MutexLock lock(&handles_mu_);
  if (!files_.empty() || !dirs_.empty()) {
    spdlog::info(
        "fuse: dropping {} open files and {} open directories the kernel did not "
        "release",
        files_.size(), dirs_.size());
  }
}

size_t Filesystem::open_files() const {
  MutexLock lock(&handles_mu_);
  return files_.size();
}

size_t Filesystem::open_dirs() const {
  MutexLock lock(&handles_mu_);
  return dirs_.size();
}

void Filesystem::Init(fuse_conn_info* conn) {
  // max_write bounds the request buffer libfuse allocates, and libfuse derives the kernel's
  // max_pages from it; 1 MiB is FUSE's 256-page ceiling. max_read must equal the max_read mount
  // option FuseMount passes (libfuse refuses the session otherwise).
  conn->max_write = kMaxIoBytes;
  conn->max_read = kMaxIoBytes;
  // Reads are served from many threads; let the kernel keep more readahead requests in flight
  // than its default of 12 so that large sequential reads keep all workers busy.
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  conn->time_gran = 1;
  auto want_if_capable = [conn](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want_if_capable(FUSE_CAP_ASYNC_READ);
  want_if_capable(FUSE_CAP_PARALLEL_DIROPS);
  // Drop cached pages when a getattr shows a different size or mtime (the object changed).
  want_if_capable(FUSE_CAP_AUTO_INVAL_DATA);
  want_if_capable(FUSE_CAP_READDIRPLUS);
  want_if_capable(FUSE_CAP_READDIRPLUS_AUTO);
  // open(O_TRUNC) arrives as one open with the flag, not an open and a truncate to 0 (which
  // would be a write of its own).
  want_if_capable(FUSE_CAP_ATOMIC_O_TRUNC);
  // Nothing here is lockable; every write(2) comes to us as it is made (no writeback cache: a
  // close must be able to report that the file did not reach the source).
  conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_WRITEBACK_CACHE);
  spdlog::info(
      "fuse: connected (protocol {}.{}, max_read {}, max_write {}, max_readahead {}, "
      "readdirplus {})",
      conn->proto_major, conn->proto_minor, conn->max_read, conn->max_write, conn->max_readahead,
      (conn->want & FUSE_CAP_READDIRPLUS) ? "on" : "off");
}

fuse_entry_param Filesystem::EntryFor(fuse_ino_t ino, const FileInfo& info,
                                      const std::string& path) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = ino;
  e.generation = 0;  // Inode numbers are never reused.
  e.attr = AttrFromInfo(ino, info, config_, client_->Writable(path));
  e.attr_timeout = config_.attr_timeout_s;
  e.entry_timeout = config_.entry_timeout_s;
  inodes_.RecordReportedSize(ino, static_cast<uint64_t>(e.attr.st_size));
  return e;
}

void Filesystem::Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (after_init_) std::call_once(after_init_once_, after_init_);
  std::optional<std::string> child = ChildPath(req, parent, name, ENOENT);
  if (!child) return;
  const std::string& path = *child;
  StatusOr<FileInfo> info = client_->Stat(path);
  if (std::optional<uint64_t> writing = WritingSize(path)) {
    info = WritingInfo(name, *writing, info);  // Open for writing here: what is written so far.
  }
  if (!info.ok()) {
    if (info.status().code() == StatusCode::kNotFound && config_.negative_timeout_s > 0) {
      // A negative entry: the kernel remembers "no such name" for the timeout.
      fuse_entry_param e;
      std::memset(&e, 0, sizeof(e));
      e.entry_timeout = config_.negative_timeout_s;
      fuse_reply_entry(req, &e);
      return;
    }
    fuse_reply_err(req, ErrnoForReply(info.status(), "lookup", path));
    return;
  }
  // Take the reference before replying, so a concurrent FORGET of older references can never
  // drop the number while this reply is in flight.
  const fuse_ino_t ino = RefFor(path, *info);
  fuse_entry_param e = EntryFor(ino, *info, path);
  if (fuse_reply_entry(req, &e) == -ENOENT) {
    // The request was aborted; the kernel never saw the entry.
    inodes_.Forget(ino, 1);
  }
}

std::optional<std::string> Filesystem::ChildPath(fuse_req_t req, fuse_ino_t parent,
                                                 const char* name, int bad_name_errno) {
  std::optional<InodeTable::Entry> dir = inodes_.Get(parent);
  int err = 0;
  if (!dir) {
    err = ESTALE;
  } else if (!dir->is_dir) {
    err = ENOTDIR;
  } else if (!IsRepresentableName(name)) {
    err = bad_name_errno;
  }
  if (err != 0) {
    fuse_reply_err(req, err);
    return std::nullopt;
  }
  return JoinPath(dir->path, name);
}

void Filesystem::Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  inodes_.Forget(ino, nlookup);
  fuse_reply_none(req);
}

void Filesystem::ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) inodes_.Forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void Filesystem::GetAttr(fuse_req_t req, fuse_ino_t ino) {
  std::optional<InodeTable::Entry> entry = inodes_.Get(ino);
  if (!entry) {
    fuse_reply_err(req, ESTALE);
    return;
  }
  StatusOr<FileInfo> info = client_->Stat(entry->path);
  // A descriptor of a file whose name was unlinked while it was open (fstat, and the kernel's
  // check of the size before a read): what is written so far, never the name's new owner.
  std::optional<uint64_t> writing = UnlinkedSize(entry->path, ino);
  if (!writing) writing = WritingSize(entry->path);
  if (writing) info = WritingInfo("", *writing, info);
  if (!info.ok()) {
    fuse_reply_err(req, ErrnoForReply(info.status(), "getattr", entry->path));
    return;
  }
  if (ino == InodeTable::kRootIno) info->is_dir = true;  // The mount root is a directory.
  // A number keeps the attributes of its version: a descriptor held open on an older version
  // must never see the size of a newer one (inode_table.h).
  if (!info->is_dir && !entry->is_dir) info = inodes_.Shown(ino, *info, writing.has_value());
  struct stat st = AttrFromInfo(ino, *info, config_, client_->Writable(entry->path));
  inodes_.RecordReportedSize(ino, static_cast<uint64_t>(st.st_size));
  fuse_reply_attr(req, &st, config_.attr_timeout_s);
}

void Filesystem::OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  std::optional<InodeTable::Entry> entry = inodes_.Get(ino);
  if (!entry) {
    fuse_reply_err(req, ESTALE);
    return;
  }
  if (!entry->is_dir) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  auto handle = std::make_unique<OpenDirHandle>(client_, entry->path, config_.readdir_page_entries);
  if (ino == InodeTable::kRootIno) {
    handle->parent_ino = InodeTable::kRootIno;
  } else {
    const std::string parent = entry->path.substr(0, std::max<size_t>(1, entry->path.rfind('/')));
    const uint64_t parent_ino = inodes_.Find(parent);
    handle->parent_ino = parent_ino != 0 ? parent_ino : kUnknownIno;
  }
  Status started;
  {
    MutexLock lock(&handle->mu);
    started = handle->stream.Start();
  }
  if (!started.ok()) {
    fuse_reply_err(req, ErrnoForReply(started, "opendir", entry->path));
    return;
  }
  OpenDirHandle* raw = handle.get();
  fi->fh = reinterpret_cast<uint64_t>(raw);
  {
    MutexLock lock(&handles_mu_);
    dirs_[fi->fh] = std::move(handle);
  }
  if (fuse_reply_open(req, fi) == -ENOENT) {
    // opendir was interrupted: no releasedir will come for this handle.
    std::unique_ptr<OpenDirHandle> dropped;
    MutexLock lock(&handles_mu_);
    dropped = std::move(dirs_[fi->fh]);
    dirs_.erase(fi->fh);
  }
}

StatusOr<std::optional<Filesystem::DirEntryView>> Filesystem::EntryAt(OpenDirHandle* dir,
                                                                      fuse_ino_t ino,
                                                                      uint64_t pos) {
  if (pos == 0) return std::optional<DirEntryView>(DirEntryView{".", ino, nullptr});
  if (pos == 1) return std::optional<DirEntryView>(DirEntryView{"..", dir->parent_ino, nullptr});
  CAIRN_ASSIGN_OR_RETURN(const FileInfo* info, dir->stream.At(pos - 2));
  if (info == nullptr) return std::optional<DirEntryView>();  // End of the listing.
  return std::optional<DirEntryView>(DirEntryView{info->name.c_str(), 0, info});
}

size_t Filesystem::AppendEntry(fuse_req_t req, OpenDirHandle* dir, const DirEntryView& entry,
                               std::span<char> room, off_t cookie, bool plus,
                               std::vector<fuse_ino_t>* referenced) {
  if (!plus) {
    struct stat st;
    std::memset(&st, 0, sizeof(st));
    if (entry.info == nullptr) {
      st.st_ino = entry.dot_ino;
      st.st_mode = S_IFDIR;
    } else {
      const uint64_t known = inodes_.Find(JoinPath(dir->stream.path(), entry.name));
      st.st_ino = known != 0 ? known : kUnknownIno;
      st.st_mode = entry.info->is_dir ? S_IFDIR : S_IFREG;
    }
    const size_t need = fuse_add_direntry(req, room.data(), room.size(), entry.name, &st, cookie);
    return need > room.size() ? 0 : need;
  }
  // readdirplus: check the fit first, so that a reference is taken only for entries that ship.
  const size_t need = fuse_add_direntry_plus(req, nullptr, 0, entry.name, nullptr, 0);
  if (need > room.size()) return 0;
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  if (entry.info == nullptr) {
    // The kernel ignores attributes of "." and ".." and takes no reference for them.
    e.attr.st_ino = entry.dot_ino;
    e.attr.st_mode = S_IFDIR;
  } else {
    const std::string path = JoinPath(dir->stream.path(), entry.name);
    FileInfo info = *entry.info;
    if (!info.is_dir) {
      if (std::optional<uint64_t> writing = WritingSize(path)) {
        info = *WritingInfo(info.name, *writing, info);
      }
    }
    const fuse_ino_t child = RefFor(path, info);
    referenced->push_back(child);
    e = EntryFor(child, info, path);
  }
  return fuse_add_direntry_plus(req, room.data(), room.size(), entry.name, &e, cookie);
}

void Filesystem::ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi,
                         bool plus) {
  auto* dir = reinterpret_cast<OpenDirHandle*>(fi->fh);
  if (off < 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  std::vector<char> buf(size);
  size_t used = 0;
  int err = 0;
  std::vector<fuse_ino_t> referenced;  // Lookups taken by this readdirplus reply.
  {
    MutexLock lock(&dir->mu);
    // Position 0 is ".", 1 is "..", 2 + i is listing entry i; the cookie stored with an entry
    // (the offset the kernel passes back to continue after it) is its position + 1.
    for (uint64_t pos = static_cast<uint64_t>(off);; ++pos) {
      StatusOr<std::optional<DirEntryView>> entry = EntryAt(dir, ino, pos);
      if (!entry.ok()) {
        err = ErrnoForReply(entry.status(), "readdir", dir->stream.path());
        break;
      }
      if (!entry->has_value()) break;
      const size_t added =
          AppendEntry(req, dir, **entry, std::span<char>(buf.data() + used, size - used),
                      static_cast<off_t>(pos + 1), plus, &referenced);
      if (added == 0) break;  // The reply buffer is full.
      used += added;
    }
  }
  if (used == 0 && err != 0) {
    fuse_reply_err(req, err);
    return;
  }
  // On an error after some entries, those entries go out now; the kernel asks again from the
  // next cookie and gets the error then.
  if (fuse_reply_buf(req, buf.data(), used) == -ENOENT) {
    for (fuse_ino_t child : referenced) inodes_.Forget(child, 1);
  }
}

void Filesystem::ReleaseDir(fuse_req_t req, fuse_file_info* fi) {
  std::unique_ptr<OpenDirHandle> dropped;
  {
    MutexLock lock(&handles_mu_);
    auto it = dirs_.find(fi->fh);
    if (it != dirs_.end()) {
      dropped = std::move(it->second);
      dirs_.erase(it);
    }
  }
  fuse_reply_err(req, 0);
}

void Filesystem::InvalidateKernelAttrs(fuse_ino_t ino) {
  fuse_session* session = session_.load();
  if (session == nullptr) return;
  // A negative offset invalidates attributes only. This takes no lock the kernel could hold
  // while waiting for the open being served, so it is safe from inside a handler.
  int rc = fuse_lowlevel_notify_inval_inode(session, ino, -1, 0);
  if (rc != 0 && rc != -ENOENT) {
    spdlog::debug("fuse: attribute invalidation of inode {} failed: {}", ino, std::strerror(-rc));
  }
}

fuse_ino_t Filesystem::RefFor(const std::string& path, const FileInfo& info) {
  if (info.is_dir) return inodes_.Ref(path, /*is_dir=*/true);
  return inodes_.RefFile(path, info, WritingSize(path).has_value());
}

void Filesystem::InvalidateKernelData(fuse_ino_t ino) {
  fuse_session* session = session_.load();
  if (session == nullptr) return;
  // Called from an open for reading, which the kernel sends without holding page locks or the
  // lock of the inode: nothing we block here waits on this thread.
  int rc = fuse_lowlevel_notify_inval_inode(session, ino, 0, 0);
  if (rc != 0 && rc != -ENOENT) {
    spdlog::debug("fuse: data invalidation of inode {} failed: {}", ino, std::strerror(-rc));
  }
}

void Filesystem::Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  std::optional<InodeTable::Entry> entry = inodes_.Get(ino);
  if (!entry) {
    fuse_reply_err(req, ESTALE);
    return;
  }
  if (entry->is_dir) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  const bool for_writing =
      (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & (O_TRUNC | O_APPEND)) != 0;
  if (for_writing) {
    if (!client_->Writable(entry->path)) {
      fuse_reply_err(req, EROFS);
      return;
    }
    WriteOptions options;
    // A file this mount created and has not closed yet is not in the source: opening it
    // again must not fail for that.
    options.create = WritingSize(entry->path).has_value();
    options.truncate = (fi->flags & O_TRUNC) != 0;
    StatusOr<std::unique_ptr<FileWriter>> writer = client_->OpenForWrite(entry->path, options);
    if (!writer.ok()) {
      fuse_reply_err(req, ErrnoForReply(writer.status(), "open for writing", entry->path));
      return;
    }
    auto file = std::make_unique<OpenFile>();
    file->writer = std::move(*writer);
    file->dirty = options.truncate;
    file->path = entry->path;
    file->ino = ino;
    fi->direct_io = 0;
    fi->keep_cache = 0;
    inodes_.OpenWriter(ino);
    Track(std::move(file), fi);
    if (fuse_reply_open(req, fi) == -ENOENT) {  // Interrupted: no release.
      Untrack(fi->fh);
      inodes_.CloseWriter(ino);
    }
    return;
  }
  if (std::shared_ptr<FileWriter> writer = WriterOf(entry->path)) {
    // Being written here: the bytes are on the worker, not (all) in the source yet. Reads see
    // what was written, as on a local disk (`git index-pack` reads back the pack it writes).
    auto file = std::make_unique<OpenFile>();
    file->written = std::move(writer);
    file->path = entry->path;
    file->ino = ino;
    fi->keep_cache = 0;
    fi->direct_io = 0;
    fi->noflush = 1;
    Track(std::move(file), fi);
    if (fuse_reply_open(req, fi) == -ENOENT) Untrack(fi->fh);  // Interrupted: no release.
    return;
  }
  StatusOr<std::unique_ptr<FileReader>> opened = client_->Open(entry->path);
  if (!opened.ok()) {
    fuse_reply_err(req, ErrnoForReply(opened.status(), "open", entry->path));
    return;
  }
  const FileInfo& info = (*opened)->info();
  if (info.is_dir) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  const InodeTable::ReaderOpen decided = inodes_.OpenReader(ino, info);
  if (decided.stale) {
    // This number shows an older version (inode_table.h). ESTALE makes the kernel look the
    // path up again (LOOKUP_REVAL), which gives the new version's number, and open that.
    spdlog::debug("fuse: open '{}': inode {} shows an older version; ESTALE", entry->path, ino);
    fuse_reply_err(req, ESTALE);
    return;
  }
  if (decided.must_invalidate) {
    // Before the reply: the kernel's own drop for an open without FOPEN_KEEP_CACHE runs after
    // it, in the opener's context, while another open could already read the pages.
    InvalidateKernelData(ino);
    inodes_.InvalidationDone(ino);
  }
  // Pages first, then the size: a getattr may bring the new size at any time.
  if (decided.size_changed) InvalidateKernelAttrs(ino);
  fi->keep_cache = decided.keep_cache ? 1 : 0;
  fi->direct_io = 0;
  fi->noflush = 1;  // Nothing to flush on close; saves a round trip per close.

  auto file = std::make_unique<OpenFile>();
  file->reader = std::move(*opened);
  file->path = entry->path;
  file->ino = ino;
  fi->fh = reinterpret_cast<uint64_t>(file.get());
  {
    MutexLock lock(&handles_mu_);
    files_[fi->fh] = std::move(file);
  }
  if (fuse_reply_open(req, fi) == -ENOENT) {
    // open was interrupted: no release will come for this handle.
    inodes_.CloseReader(ino);
    std::shared_ptr<OpenFile> dropped;
    MutexLock lock(&handles_mu_);
    dropped = std::move(files_[fi->fh]);
    files_.erase(fi->fh);
  }
}

void Filesystem::Read(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi) {
  auto* file = reinterpret_cast<OpenFile*>(fi->fh);
  if (file->reader == nullptr) {
    ReadWhileWriting(req, size, off, file);
    return;
  }
  if (off < 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  // The reader reads into this scratch buffer only what is not already in memory (pages of the
  // client's page buffer are replied from where they lie, one writev for the whole reply). One
  // per FUSE thread, reused: a fresh 1 MiB allocation per request would be an mmap and 256 page
  // faults every time.
  // The kernel treats a short reply as end of file, so the view is full unless the file ends.
  thread_local std::vector<char> scratch;
  if (scratch.size() < size) scratch.resize(size);
  StatusOr<ReadView> view =
      file->reader->ReadInPlace(static_cast<uint64_t>(off), std::span<char>(scratch.data(), size));
  if (!view.ok()) {
    fuse_reply_err(req, ErrnoForReply(view.status(), "read", file->path));
    return;
  }
  if (view->size > size) {
    spdlog::error("fuse: read '{}': reader returned {} bytes for a {}-byte request", file->path,
                  view->size, size);
    fuse_reply_err(req, EIO);
    return;
  }
  thread_local std::vector<iovec> iov;
  iov.clear();
  for (std::span<const char> piece : view->pieces) {
    iov.push_back(iovec{const_cast<char*>(piece.data()), piece.size()});
  }
  // The handle's version is its inode's (inode_table.h): these bytes may enter the kernel's
  // page cache, which no handle of another version reads.
  fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
}

void Filesystem::ReadWhileWriting(fuse_req_t req, size_t size, off_t off, OpenFile* file) {
  if (off < 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  thread_local std::vector<char> scratch;
  if (scratch.size() < size) scratch.resize(size);
  const std::span<char> out(scratch.data(), size);
  FileWriter* writer = file->writer ? file->writer.get() : file->written.get();
  StatusOr<size_t> n = writer->ReadAt(static_cast<uint64_t>(off), out);
  if (!n.ok() && file->written && n.status().code() == StatusCode::kFailedPrecondition) {
    // The writer was closed meanwhile: read what it committed.
    MutexLock lock(&file->committed_mu);
    if (file->committed_reader == nullptr) {
      StatusOr<std::unique_ptr<FileReader>> opened = client_->Open(file->path);
      if (opened.ok()) file->committed_reader = std::move(*opened);
      n = opened.status();
    }
    if (file->committed_reader != nullptr) {
      n = file->committed_reader->Read(static_cast<uint64_t>(off), out);
    }
  }
  if (!n.ok()) {
    fuse_reply_err(req, ErrnoForReply(n.status(), "read", file->path));
    return;
  }
  fuse_reply_buf(req, scratch.data(), std::min(*n, size));
}

void Filesystem::Release(fuse_req_t req, fuse_file_info* fi) {
  std::shared_ptr<OpenFile> dropped = Untrack(fi->fh);
  if (dropped && dropped->writer) {
    // Flush committed what close(2) could report; what was written after it (another
    // descriptor of the same open file) is committed here, where nobody can be told of a
    // failure but the log.
    const int err = CommitIfDirty(dropped.get(), "release");
    bool unlinked = false;
    {
      MutexLock commit(&dropped->commit_mu);  // After an unlink of its name in progress.
      unlinked = dropped->unlinked;
    }
    // Opened for writing and never written: nothing to commit (a close would rewrite the
    // object with its own content), so the worker's handle is just dropped; so is an unlinked
    // file's.
    const bool close = err == 0 && dropped->committed && !unlinked;
    Status closed = close ? dropped->writer->Close().status() : dropped->writer->Abort();
    if (!closed.ok()) {
      spdlog::warn("fuse: release of '{}': {}", dropped->path, closed.ToString());
      if (close) dropped->writer->Abort().IgnoreError();
    }
    inodes_.CloseWriter(dropped->ino);
    InvalidateKernelAttrs(dropped->ino);  // The object's new version and size.
  } else if (dropped && dropped->reader) {
    inodes_.CloseReader(dropped->ino);
  }
  fuse_reply_err(req, 0);
}

void Filesystem::Track(std::unique_ptr<OpenFile> file, fuse_file_info* fi) {
  fi->fh = reinterpret_cast<uint64_t>(file.get());
  MutexLock lock(&handles_mu_);
  if (file->writer) writing_[file->path].push_back(file.get());
  files_[fi->fh] = std::move(file);
}

std::shared_ptr<Filesystem::OpenFile> Filesystem::Untrack(uint64_t fh) {
  MutexLock lock(&handles_mu_);
  auto it = files_.find(fh);
  if (it == files_.end()) return nullptr;
  std::shared_ptr<OpenFile> file = std::move(it->second);
  files_.erase(it);
  if (file->writer) {
    auto w = writing_.find(file->path);
    if (w != writing_.end()) {
      std::erase(w->second, file.get());
      if (w->second.empty()) writing_.erase(w);
    }
  }
  return file;
}

std::vector<std::shared_ptr<Filesystem::OpenFile>> Filesystem::WritersOf(
    const std::string& path) const {
  MutexLock lock(&handles_mu_);
  std::vector<std::shared_ptr<OpenFile>> writers;
  auto it = writing_.find(path);
  if (it == writing_.end()) return writers;
  for (OpenFile* file : it->second) {
    auto tracked = files_.find(reinterpret_cast<uint64_t>(file));
    if (tracked != files_.end()) writers.push_back(tracked->second);
  }
  return writers;
}

std::optional<uint64_t> Filesystem::UnlinkedSize(const std::string& path, fuse_ino_t ino) const {
  MutexLock lock(&handles_mu_);
  auto it = writing_.find(path);
  if (it == writing_.end()) return std::nullopt;
  std::optional<uint64_t> size;
  for (const OpenFile* file : it->second) {
    if (file->unlinked && file->ino == ino) size = std::max(size.value_or(0), file->writer->size());
  }
  return size;
}

std::shared_ptr<FileWriter> Filesystem::WriterOf(const std::string& path) const {
  MutexLock lock(&handles_mu_);
  auto it = writing_.find(path);
  if (it == writing_.end()) return nullptr;
  for (auto file = it->second.rbegin(); file != it->second.rend(); ++file) {
    if (!(*file)->unlinked) return (*file)->writer;  // Not a file whose name went.
  }
  return nullptr;
}

bool Filesystem::MarkDirty(const std::string& path, const FileWriter* writer) {
  MutexLock lock(&handles_mu_);
  auto it = writing_.find(path);
  if (it == writing_.end()) return false;
  for (OpenFile* file : it->second) {
    if (file->writer.get() == writer) {
      file->dirty = true;
      return true;
    }
  }
  return false;
}

std::optional<uint64_t> Filesystem::WritingSize(const std::string& path) const {
  MutexLock lock(&handles_mu_);
  auto it = writing_.find(path);
  if (it == writing_.end()) return std::nullopt;
  std::optional<uint64_t> size;
  for (const OpenFile* file : it->second) {
    if (!file->unlinked) size = std::max(size.value_or(0), file->writer->size());
  }
  return size;
}

int Filesystem::CommitIfDirty(OpenFile* file, const char* op) {
  // A commit in flight has taken the mark already: waiting for it is what makes a second
  // caller's 0 true (and a failed one sets the mark again, so that caller tries once more).
  MutexLock commit(&file->commit_mu);
  if (file->unlinked) return 0;  // Never committed: its name is gone.
  if (!file->dirty.exchange(false)) return 0;
  StatusOr<FileInfo> synced = file->writer->Sync();
  if (synced.ok()) {
    file->committed = true;
    return 0;
  }
  file->dirty = true;  // Not in the source: a later flush or release tries again.
  const Status& why = synced.status();
  spdlog::warn("fuse: {} '{}': the file could not be written to the source: {}", op, file->path,
               why.ToString());
  return ErrnoFromStatus(why);
}

void Filesystem::Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                        fuse_file_info* fi) {
  std::optional<std::string> child = ChildPath(req, parent, name, EINVAL);
  if (!child) return;
  const std::string& path = *child;
  if (!client_->Writable(path)) {
    fuse_reply_err(req, EROFS);
    return;
  }
  if (!S_ISREG(mode)) {
    fuse_reply_err(req, EPERM);  // Only regular files exist in an object store.
    return;
  }
  WriteOptions options;
  options.create = true;
  options.exclusive = (fi->flags & O_EXCL) != 0;
  // Only O_TRUNC empties a file: the kernel creates when this mount's lookup found nothing,
  // which may be out of date (another client made the file since), and an open(O_CREAT|
  // O_APPEND) of a log must not cut what is there (POSIX). (Such a create costs the worker a
  // stat of the source, which a truncating one spares when the lookup was fresh.)
  options.truncate = (fi->flags & O_TRUNC) != 0 || options.exclusive;
  StatusOr<std::unique_ptr<FileWriter>> writer = client_->OpenForWrite(path, options);
  if (!writer.ok()) {
    fuse_reply_err(req, ErrnoForReply(writer.status(), "create", path));
    return;
  }
  auto file = std::make_unique<OpenFile>();
  file->writer = std::move(*writer);
  // An empty file is a file too: close commits it. One that kept content (it existed after
  // all) is committed once written, as an open's (a `touch` uploads nothing again).
  file->dirty = options.truncate || file->writer->size() == 0;
  file->path = path;
  const fuse_ino_t ino = inodes_.RefNewFile(path);
  inodes_.OpenWriter(ino);
  file->ino = ino;
  FileInfo info;
  info.name = name;
  info.size = file->writer->size();  // What it kept: an O_APPEND write goes after it.
  info.mtime_ns = Clock::Real()->WallNanos();
  fuse_entry_param e = EntryFor(ino, info, path);
  fi->direct_io = 0;
  fi->keep_cache = 0;
  Track(std::move(file), fi);
  if (fuse_reply_create(req, &e, fi) == -ENOENT) {
    Untrack(fi->fh);  // Interrupted: the writer aborts as it goes.
    inodes_.CloseWriter(ino);
    inodes_.Forget(ino, 1);
  }
}

void Filesystem::Write(fuse_req_t req, const char* buf, size_t size, off_t off,
                       fuse_file_info* fi) {
  auto* file = reinterpret_cast<OpenFile*>(fi->fh);
  if (file->writer == nullptr) {
    fuse_reply_err(req, EBADF);
    return;
  }
  if (off < 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  Status written =
      file->writer->Write(static_cast<uint64_t>(off), std::span<const char>(buf, size));
  if (!written.ok()) {
    fuse_reply_err(req, ErrnoForReply(written, "write", file->path));
    return;
  }
  file->dirty = true;
  fuse_reply_write(req, size);
}

void Filesystem::Flush(fuse_req_t req, fuse_file_info* fi) {
  auto* file = reinterpret_cast<OpenFile*>(fi->fh);
  fuse_reply_err(req, file->writer ? CommitIfDirty(file, "close") : 0);
}

void Filesystem::Fsync(fuse_req_t req, fuse_file_info* fi) {
  auto* file = reinterpret_cast<OpenFile*>(fi->fh);
  if (file->writer) {
    fuse_reply_err(req, CommitIfDirty(file, "fsync"));
    return;
  }
  // fsync(2) makes the file durable whichever descriptor names it: a read-only one of a file
  // this mount is writing (`sync FILE` opens it so) commits the file's open writers.
  int err = 0;
  for (const std::shared_ptr<OpenFile>& writer : WritersOf(file->path)) {
    if (writer->ino != file->ino) continue;  // A file of the name made since.
    const int failed = CommitIfDirty(writer.get(), "fsync");
    if (err == 0) err = failed;
  }
  fuse_reply_err(req, err);
}

void Filesystem::SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                         fuse_file_info* fi) {
  std::optional<InodeTable::Entry> entry = inodes_.Get(ino);
  if (!entry) {
    fuse_reply_err(req, ESTALE);
    return;
  }
  if (!client_->Writable(entry->path)) {
    fuse_reply_err(req, EROFS);
    return;
  }
  // An object store keeps no owner or mode bits. A change of them is accepted and has no
  // effect (files stay 0644, directories 0755, owned by the mount's user), as rclone and goofys
  // have it: `tar x`, `rsync -a`, `cp -p`, shutil.copy and git set modes on what they write and
  // fail when they cannot. Setuid, setgid and sticky bits are refused (EPERM): a program asking
  // for them relies on them. Times are the source's: a change of them is accepted and has no
  // effect (so `touch` works).
  if ((to_set & FUSE_SET_ATTR_MODE) != 0 && (attr->st_mode & 07000) != 0) {
    fuse_reply_err(req, EPERM);
    return;
  }
  if ((to_set & FUSE_SET_ATTR_SIZE) != 0) {
    if (entry->is_dir) {
      fuse_reply_err(req, EISDIR);
      return;
    }
    const uint64_t size = static_cast<uint64_t>(std::max<off_t>(attr->st_size, 0));
    auto* file = fi != nullptr ? reinterpret_cast<OpenFile*>(fi->fh) : nullptr;
    if (file != nullptr && file->writer != nullptr) {  // ftruncate
      Status truncated = file->writer->Truncate(size);
      if (!truncated.ok()) {
        fuse_reply_err(req, ErrnoForReply(truncated, "truncate", entry->path));
        return;
      }
      file->dirty = true;
    } else if (std::shared_ptr<FileWriter> open = WriterOf(entry->path)) {
      // truncate(2) of a file this mount has open for writing: through that file. A writer of
      // its own would not find a file created here (not in the source yet), and its commit
      // would make the open file's fail (the object changed under it).
      Status truncated = open->Truncate(size);
      if (truncated.ok() && !MarkDirty(entry->path, open.get())) {
        truncated = FailedPreconditionError(entry->path + " was closed during the truncate");
      }
      if (!truncated.ok()) {
        fuse_reply_err(req, ErrnoForReply(truncated, "truncate", entry->path));
        return;
      }
    } else {  // truncate(2) by path: a write of its own.
      WriteOptions options;
      options.create = false;
      options.truncate = size == 0;
      StatusOr<std::unique_ptr<FileWriter>> writer = client_->OpenForWrite(entry->path, options);
      Status done = writer.status();
      if (done.ok() && size != 0) done = (*writer)->Truncate(size);
      if (done.ok()) done = (*writer)->Close().status();
      inodes_.Unfix(ino);  // Its content changed here: the number shows what getattr finds.
      if (!done.ok()) {
        fuse_reply_err(req, ErrnoForReply(done, "truncate", entry->path));
        return;
      }
    }
  }
  GetAttr(req, ino);
}

void Filesystem::Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  std::optional<std::string> child = ChildPath(req, parent, name, ENOENT);
  if (!child) return;
  const std::string& path = *child;
  if (!client_->Writable(path)) {
    fuse_reply_err(req, EROFS);
    return;
  }
  // Files of this name open for writing here: none commits while the name is removed (each
  // one's commit lock), and none after (unlinked); a name that exists only as such a file
  // (created, not yet committed) is not in the source, which is no error.
  std::vector<std::shared_ptr<OpenFile>> open = WritersOf(path);
  Status removed = LockedForUnlink(open, [&] {
    Status s = client_->Remove(path);
    if (!open.empty() && s.code() == StatusCode::kNotFound) s = Status::Ok();
    for (const auto& file : open) file->unlinked = s.ok();
    return s;
  });
  fuse_reply_err(req, removed.ok() ? 0 : ErrnoForReply(removed, "unlink", path));
}

Status Filesystem::LockedForUnlink(const std::vector<std::shared_ptr<OpenFile>>& files,
                                   const std::function<Status()>& unlink) {
  // Always in the order WritersOf lists them (open order): two unlinks of one name lock alike.
  for (const auto& file : files) file->commit_mu.Lock();
  Status result = unlink();
  for (const auto& file : files) file->commit_mu.Unlock();
  return result;
}

void Filesystem::MakeDir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  std::optional<std::string> child = ChildPath(req, parent, name, EINVAL);
  if (!child) return;
  const std::string& path = *child;
  if (!client_->Writable(path)) {
    fuse_reply_err(req, EROFS);
    return;
  }
  Status made = client_->MakeDir(path);
  if (!made.ok()) {
    fuse_reply_err(req, ErrnoForReply(made, "mkdir", path));
    return;
  }
  FileInfo info;
  info.name = name;
  info.is_dir = true;
  info.mtime_ns = Clock::Real()->WallNanos();
  const fuse_ino_t ino = inodes_.Ref(path, /*is_dir=*/true);
  fuse_entry_param e = EntryFor(ino, info, path);
  if (fuse_reply_entry(req, &e) == -ENOENT) inodes_.Forget(ino, 1);
}

void Filesystem::RemoveDir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  std::optional<std::string> child = ChildPath(req, parent, name, ENOENT);
  if (!child) return;
  const std::string& path = *child;
  if (!client_->Writable(path)) {
    fuse_reply_err(req, EROFS);
    return;
  }
  Status removed = client_->RemoveDir(path);
  int err = 0;
  if (removed.code() == StatusCode::kFailedPrecondition) {
    err = ENOTEMPTY;
  } else if (removed.code() == StatusCode::kInvalidArgument) {
    err = ENOTDIR;
  } else if (!removed.ok()) {
    err = ErrnoForReply(removed, "rmdir", path);
  }
  fuse_reply_err(req, err);
}

void Filesystem::Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
                        const char* new_name, unsigned int flags) {
  std::optional<std::string> from = ChildPath(req, parent, name, ENOENT);
  if (!from) return;
  std::optional<std::string> to = ChildPath(req, new_parent, new_name, EINVAL);
  if (!to) return;
  if ((flags & ~static_cast<unsigned int>(RENAME_NOREPLACE)) != 0) {
    fuse_reply_err(req, EINVAL);  // RENAME_EXCHANGE, RENAME_WHITEOUT: no object store swaps.
    return;
  }
  if (!client_->Writable(*from) || !client_->Writable(*to)) {
    fuse_reply_err(req, EROFS);
    return;
  }
  Status moved = client_->Rename(*from, *to, (flags & RENAME_NOREPLACE) != 0);
  int err = 0;
  switch (moved.code()) {
    case StatusCode::kOk:
      inodes_.Move(*from, *to);
      break;
    case StatusCode::kUnimplemented:  // A directory on S3, or across mounts: `mv` copies.
      err = EXDEV;
      break;
    case StatusCode::kInvalidArgument:  // Into itself, or a file onto a directory.
      err = to->starts_with(*from + "/") ? EINVAL : EISDIR;
      break;
    case StatusCode::kFailedPrecondition: {
      // A directory onto a file or a non-empty one; for a file, the source changed it under
      // the rename (its version check failed): not a rename POSIX would refuse.
      StatusOr<FileInfo> source = client_->Stat(*from);
      if (source.ok() && !source->is_dir) {
        spdlog::warn("fuse: rename '{}': it changed in the source meanwhile, failing with EIO: {}",
                     *from, moved.ToString());
        err = EIO;
        break;
      }
      StatusOr<FileInfo> target = client_->Stat(*to);
      err = target.ok() && !target->is_dir ? ENOTDIR : ENOTEMPTY;
      break;
    }
    default:
      err = ErrnoForReply(moved, "rename", *from);
  }
  fuse_reply_err(req, err);
}

void Filesystem::RefuseChange(fuse_req_t req, fuse_ino_t ino, int err) {
  std::optional<InodeTable::Entry> entry = inodes_.Get(ino);
  fuse_reply_err(req, entry && client_->Writable(entry->path) ? err : EROFS);
}

void Filesystem::StatFs(fuse_req_t req) {
  struct statvfs st;
  std::memset(&st, 0, sizeof(st));
  st.f_bsize = kStatFsBlockSize;
  st.f_frsize = kStatFsBlockSize;
  st.f_blocks = kStatFsBlocks;
  st.f_bfree = 0;
  st.f_bavail = 0;
  st.f_files = kStatFsFiles;
  st.f_ffree = 0;
  st.f_favail = 0;
  st.f_namemax = kNameMax;
  st.f_flag = ST_RDONLY;
  fuse_reply_statfs(req, &st);
}

const fuse_lowlevel_ops& Filesystem::Ops() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o;
    std::memset(&o, 0, sizeof(o));
    o.init = [](void* userdata, fuse_conn_info* conn) {
      static_cast<Filesystem*>(userdata)->Init(conn);
    };
    o.lookup = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
      Fs(req)->Lookup(req, parent, name);
    };
    o.forget = [](fuse_req_t req, fuse_ino_t ino, uint64_t n) { Fs(req)->Forget(req, ino, n); };
    o.forget_multi = [](fuse_req_t req, size_t count, fuse_forget_data* forgets) {
      Fs(req)->ForgetMulti(req, count, forgets);
    };
    o.getattr = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info*) { Fs(req)->GetAttr(req, ino); };
    o.opendir = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
      Fs(req)->OpenDir(req, ino, fi);
    };
    o.readdir = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
      Fs(req)->ReadDir(req, ino, size, off, fi, /*plus=*/false);
    };
    o.readdirplus = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
      Fs(req)->ReadDir(req, ino, size, off, fi, /*plus=*/true);
    };
    o.releasedir = [](fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
      Fs(req)->ReleaseDir(req, fi);
    };
    o.open = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
      Fs(req)->Open(req, ino, fi);
    };
    o.read = [](fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
      Fs(req)->Read(req, size, off, fi);
    };
    o.release = [](fuse_req_t req, fuse_ino_t, fuse_file_info* fi) { Fs(req)->Release(req, fi); };
    o.statfs = [](fuse_req_t req, fuse_ino_t) { Fs(req)->StatFs(req); };

    // Extended attributes: ENOSYS makes the kernel stop asking for the rest of the mount (it
    // then answers EOPNOTSUPP itself), which saves a round trip per `ls -l` entry.
    o.getxattr = [](fuse_req_t req, fuse_ino_t, const char*, size_t) {
      fuse_reply_err(req, ENOSYS);
    };
    o.listxattr = [](fuse_req_t req, fuse_ino_t, size_t) { fuse_reply_err(req, ENOSYS); };

    // Writes (write-through mounts; EROFS elsewhere).
    o.create = [](fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                  fuse_file_info* fi) { Fs(req)->Create(req, parent, name, mode, fi); };
    o.write = [](fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off,
                 fuse_file_info* fi) { Fs(req)->Write(req, buf, size, off, fi); };
    o.flush = [](fuse_req_t req, fuse_ino_t, fuse_file_info* fi) { Fs(req)->Flush(req, fi); };
    o.fsync = [](fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) { Fs(req)->Fsync(req, fi); };
    o.setattr = [](fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                   fuse_file_info* fi) { Fs(req)->SetAttr(req, ino, attr, to_set, fi); };
    o.unlink = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
      Fs(req)->Unlink(req, parent, name);
    };
    o.mkdir = [](fuse_req_t req, fuse_ino_t parent, const char* name, mode_t) {
      Fs(req)->MakeDir(req, parent, name);
    };
    o.rmdir = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
      Fs(req)->RemoveDir(req, parent, name);
    };
    o.rename = [](fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
                  const char* new_name, unsigned int flags) {
      Fs(req)->Rename(req, parent, name, new_parent, new_name, flags);
    };
    // Not in an object store (docs/fuse.md): special files, symbolic and hard links.
    o.mknod = [](fuse_req_t req, fuse_ino_t parent, const char*, mode_t, dev_t) {
      Fs(req)->RefuseChange(req, parent, EPERM);
    };
    o.symlink = [](fuse_req_t req, const char*, fuse_ino_t parent, const char*) {
      Fs(req)->RefuseChange(req, parent, EPERM);
    };
    o.link = [](fuse_req_t req, fuse_ino_t, fuse_ino_t parent, const char*) {
      Fs(req)->RefuseChange(req, parent, EPERM);
    };
    o.setxattr = [](fuse_req_t req, fuse_ino_t ino, const char*, const char*, size_t, int) {
      Fs(req)->RefuseChange(req, ino, ENOTSUP);
    };
    o.removexattr = [](fuse_req_t req, fuse_ino_t ino, const char*) {
      Fs(req)->RefuseChange(req, ino, ENOTSUP);
    };
    o.fallocate = [](fuse_req_t req, fuse_ino_t ino, int, off_t, off_t, fuse_file_info*) {
      Fs(req)->RefuseChange(req, ino, EOPNOTSUPP);
    };
    // ENOSYS: the kernel copies through read and write itself (and stops asking).
    o.copy_file_range = [](fuse_req_t req, fuse_ino_t, off_t, fuse_file_info*, fuse_ino_t, off_t,
                           fuse_file_info*, size_t, int) { fuse_reply_err(req, ENOSYS); };
    return o;
  }();
  return ops;
}

}  // namespace cairn::fuse
