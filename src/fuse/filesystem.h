// Filesystem: the FUSE low-level request handlers that present a cairn::Client namespace as a
// POSIX tree, writable where a mount is write-through (docs/fuse.md, "Writes"). Internal to
// the fuse module; FuseMount (fuse_mount.h) is the public API.
//
// What each request does:
//   lookup / getattr / readdirplus  Client::Stat or the listing entry -> attributes; every entry
//                                   handed to the kernel takes one lookup reference in the
//                                   InodeTable, returned by forget / forget_multi.
//   opendir / readdir(plus)         a DirStream per open directory (fi->fh), paging through
//                                   Client::ListDir; offsets are listing positions + 2.
//   open / read / release           a FileReader per open file (fi->fh), pinned to one version;
//                                   one inode number per version (inode_table.h), so
//                                   keep_cache is set; an open of a number whose version is
//                                   gone gets ESTALE (the kernel looks the path up again).
//   create / open for writing /     a FileWriter per open file (Client::OpenForWrite): write
//   write / flush / fsync /         sends the bytes, flush and fsync commit (so close(2) reports
//   release / setattr(size) /       a failed upload), release closes; getattr and lookup of a
//   unlink / mkdir / rmdir /        file open for writing report its size so far; unlink,
//   rename                          mkdir, rmdir and rename are Client::Remove, MakeDir,
//                                   RemoveDir and Rename (EXDEV for what the source cannot
//                                   rename: directories on S3, across mounts; `mv` then
//                                   copies). Only in write-through mounts.
//   statfs                          fixed, large figures.
//   every other mutating request    EROFS in read-only mounts; in writable ones links and
//                                   special files EPERM, chmod/chown accepted without effect
//                                   (setuid/setgid/sticky bits: EPERM).
//
// Lock order (outer to inner): OpenDir::mu -> handles_mu_ or InodeTable's mutex (never both).
// handles_mu_ is never held across a client call or a FUSE reply; under it only FileWriter::size()
// is called (the writer's own leaf lock). Client calls are made without any Filesystem lock except
// OpenDir::mu (which only serializes one directory handle).
//
// Thread-safety: the handlers run concurrently on libfuse's worker threads; all shared state is
// guarded as annotated. The kernel guarantees that a file handle receives no request after its
// release, which is what makes the unlocked fi->fh dereferences safe.
#ifndef CAIRN_FUSE_FILESYSTEM_H_
#define CAIRN_FUSE_FILESYSTEM_H_

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cairn/client.h"
#include "common/thread_annotations.h"
#include "fuse/dir_stream.h"
#include "fuse/inode_table.h"

namespace cairn::fuse {

// Largest read and write the mount negotiates with the kernel (FUSE's 256-page ceiling).
inline constexpr uint32_t kMaxIoBytes = 1u << 20;

struct FilesystemConfig {
  double attr_timeout_s = 1.0;
  double entry_timeout_s = 1.0;
  double negative_timeout_s = 1.0;  // 0: do not let the kernel cache "does not exist".
  int readdir_page_entries = 1024;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Attributes of an entry: 0444 regular files / 0555 directories (0644 / 0755 when `writable`)
// owned by config uid/gid, nlink 1, times from info.mtime_ns, st_blocks in 512-byte units.
struct stat AttrFromInfo(uint64_t ino, const FileInfo& info, const FilesystemConfig& config,
                         bool writable = false);

// Joins a directory path and an entry name: ("/", "a") -> "/a", ("/a", "b") -> "/a/b".
std::string JoinPath(const std::string& dir, std::string_view name);

class Filesystem {
 public:
  // `client` is not owned and must outlive the Filesystem.
  Filesystem(Client* client, FilesystemConfig config);
  ~Filesystem();  // Frees handles the kernel never released (connection aborted).

  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;

  // The handler table to pass to fuse_session_new with `this` as userdata.
  static const fuse_lowlevel_ops& Ops();

  // The session, for kernel notifications (attribute invalidation). Set once before the session
  // loop starts; may be null (notifications are then skipped).
  void set_session(fuse_session* session) { session_.store(session); }
  // Runs once, at the first lookup: the kernel has applied the INIT reply by then, and no file
  // has been opened yet (FuseMount raises the kernel's readahead here). Set before the loop.
  void set_after_init(std::function<void()> after_init) { after_init_ = std::move(after_init); }

  InodeTable& inodes() { return inodes_; }
  const InodeTable& inodes() const { return inodes_; }
  // Handles currently open (thread-safe).
  size_t open_files() const;
  size_t open_dirs() const;

  // Handlers (called through Ops()).
  void Init(fuse_conn_info* conn);
  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
  void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets);
  void GetAttr(fuse_req_t req, fuse_ino_t ino);
  void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi,
               bool plus);
  void ReleaseDir(fuse_req_t req, fuse_file_info* fi);
  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Read(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi);
  void Release(fuse_req_t req, fuse_file_info* fi);
  void StatFs(fuse_req_t req);
  void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi);
  void Write(fuse_req_t req, const char* buf, size_t size, off_t off, fuse_file_info* fi);
  void Flush(fuse_req_t req, fuse_file_info* fi);
  void Fsync(fuse_req_t req, fuse_file_info* fi);
  void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi);
  void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name);
  void MakeDir(fuse_req_t req, fuse_ino_t parent, const char* name);
  void RemoveDir(fuse_req_t req, fuse_ino_t parent, const char* name);
  void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
              const char* new_name, unsigned int flags);
  // Requests this mount does not support in a write-through mount (links, mknod, ...):
  // EROFS in a read-only one, else `err`.
  void RefuseChange(fuse_req_t req, fuse_ino_t ino, int err);

 private:
  struct OpenFile {
    std::unique_ptr<FileReader> reader;  // A file open for reading; or:
    std::shared_ptr<FileWriter> writer;  // a file open for writing (thread-safe itself); or:
    // a file opened for reading while this mount writes it: reads go to its newest writer
    // (FileWriter::ReadAt, what was written so far) until that writer is closed, then to the
    // object it committed (`committed_reader`, opened then).
    std::shared_ptr<FileWriter> written;
    Mutex committed_mu;
    std::unique_ptr<FileReader> committed_reader GUARDED_BY(committed_mu);
    // Written since its last commit (a created or truncated file starts so: closing it must
    // commit even without a write).
    std::atomic<bool> dirty{false};
    std::atomic<bool> committed{false};  // A flush or fsync committed it at least once.
    // One commit at a time (CommitIfDirty): a flush and an fsync of one open file (a close of a
    // dup and an fsync, which the kernel does not serialize) both wait for a commit that covers
    // the writes before them. An unlink of its name holds it too.
    Mutex commit_mu;
    // Its name was unlinked while it was open (changed with commit_mu held): it is no longer
    // looked up, never committed, and its writes are dropped at release (POSIX: the data of an
    // unlinked file goes with its last descriptor).
    std::atomic<bool> unlinked{false};
    std::string path;
    fuse_ino_t ino = 0;
  };
  struct OpenDirHandle {
    OpenDirHandle(Client* client, std::string path, int page_entries)
        : stream(client, std::move(path), page_entries) {}
    fuse_ino_t parent_ino = 0;  // For "..": FUSE_UNKNOWN_INO-like value when not known.
    Mutex mu;
    DirStream stream GUARDED_BY(mu);
  };

  // One directory entry to emit: "." / ".." (info == nullptr, number dot_ino) or a listing
  // entry (info set; name points into it).
  struct DirEntryView {
    const char* name;
    fuse_ino_t dot_ino;
    const FileInfo* info;
  };
  // The entry at readdir position `pos`; nullopt at the end of the listing.
  StatusOr<std::optional<DirEntryView>> EntryAt(OpenDirHandle* dir, fuse_ino_t ino, uint64_t pos)
      REQUIRES(dir->mu);
  // Appends `entry` to `room`; returns the bytes used, 0 when it does not fit. For readdirplus
  // takes one lookup reference per entry added and records it in `referenced`.
  size_t AppendEntry(fuse_req_t req, OpenDirHandle* dir, const DirEntryView& entry,
                     std::span<char> room, off_t cookie, bool plus,
                     std::vector<fuse_ino_t>* referenced) REQUIRES(dir->mu);
  // Makes the kernel drop its cached attributes of `ino` (size, mtime) so its next access asks
  // again; used when an open sees a version whose size differs from what the kernel was told.
  void InvalidateKernelAttrs(fuse_ino_t ino);
  // Makes the kernel drop its cached pages of `ino` (pages this mount's writes left that an
  // open for reading cannot vouch for).
  void InvalidateKernelData(fuse_ino_t ino);
  // The number for `path` as a stat found it (InodeTable::Ref / RefFile), one lookup taken.
  fuse_ino_t RefFor(const std::string& path, const FileInfo& info);
  fuse_entry_param EntryFor(fuse_ino_t ino, const FileInfo& info, const std::string& path);
  // The path of `name` in directory `parent`; nullopt after replying the error (ESTALE,
  // ENOTDIR, or `bad_name_errno` for a name the namespace cannot hold).
  std::optional<std::string> ChildPath(fuse_req_t req, fuse_ino_t parent, const char* name,
                                       int bad_name_errno);
  // The size of `path` as written so far by this mount's open writers (the largest); nullopt
  // when none has it open. Lookup and getattr answer from it: the object is not in the source
  // until the first commit.
  std::optional<uint64_t> WritingSize(const std::string& path) const EXCLUDES(handles_mu_);
  // The newest writer of `path` open in this mount; null when none.
  std::shared_ptr<FileWriter> WriterOf(const std::string& path) const EXCLUDES(handles_mu_);
  // Marks the open file of `path` whose writer is `writer` as changed (its flush or release
  // commits it); false when it is no longer open.
  bool MarkDirty(const std::string& path, const FileWriter* writer) EXCLUDES(handles_mu_);
  // Read of a handle without a reader: one open for writing (O_RDWR), or a read-only open of a
  // file this mount is writing.
  void ReadWhileWriting(fuse_req_t req, size_t size, off_t off, OpenFile* file);
  // Registers an open file under fi->fh (a writer also under its path).
  void Track(std::unique_ptr<OpenFile> file, fuse_file_info* fi) EXCLUDES(handles_mu_);
  std::shared_ptr<OpenFile> Untrack(uint64_t fh) EXCLUDES(handles_mu_);
  // The files of `path` this mount has open for writing (kept alive by the caller's references
  // even if released meanwhile).
  std::vector<std::shared_ptr<OpenFile>> WritersOf(const std::string& path) const
      EXCLUDES(handles_mu_);
  // The size of inode `ino`'s files open for writing whose name `path` was unlinked meanwhile;
  // nullopt if none.
  std::optional<uint64_t> UnlinkedSize(const std::string& path, fuse_ino_t ino) const
      EXCLUDES(handles_mu_);
  // Commits an open writer's file if it was written since its last commit; the errno for the
  // reply (0 when all is well).
  int CommitIfDirty(OpenFile* file, const char* op);
  // Runs `unlink` with the commit lock of every one of `files` held (a set the analysis cannot
  // follow: locked and unlocked here, in one order).
  static Status LockedForUnlink(const std::vector<std::shared_ptr<OpenFile>>& files,
                                const std::function<Status()>& unlink) NO_THREAD_SAFETY_ANALYSIS;

  Client* const client_;
  const FilesystemConfig config_;
  InodeTable inodes_;
  std::atomic<fuse_session*> session_{nullptr};
  std::function<void()> after_init_;
  std::once_flag after_init_once_;

  mutable Mutex handles_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<OpenFile>> files_ GUARDED_BY(handles_mu_);
  std::unordered_map<uint64_t, std::unique_ptr<OpenDirHandle>> dirs_ GUARDED_BY(handles_mu_);
  // Files open for writing, by path (for their size before the first commit).
  std::unordered_map<std::string, std::vector<OpenFile*>> writing_ GUARDED_BY(handles_mu_);
};

}  // namespace cairn::fuse

#endif  // CAIRN_FUSE_FILESYSTEM_H_
