// Disk: the seam between the page store and the local file system.
//
// The page store reaches files only through this interface, so unit tests run against an
// in-memory disk (NewMemDisk) and fault injection is a DiskWrapper subclass, not an `if` in the
// store. The operations are the few the store needs: directories, whole-file writes of new files,
// rename, unlink, listing with sizes, and opening files for positional reads.
//
// Paths are plain strings built by the store ('/' separated). Errors follow common/status.h:
// NotFound (ENOENT), PermissionDenied (EACCES, EPERM, EROFS where stated), AlreadyExists,
// ResourceExhausted (ENOSPC, EDQUOT), IoError otherwise.
//
// Thread-safety: every implementation is safe for concurrent use. A RandomAccessFile keeps
// reading the file it opened after that file is unlinked or replaced under its name (POSIX
// semantics), which is what lets readers race with eviction safely.
#ifndef CAIRN_PAGESTORE_DISK_H_
#define CAIRN_PAGESTORE_DISK_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace cairn::pagestore {

// A file opened for positional reads.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to out.size() bytes at `offset`; returns how many were read (fewer only at the end of
  // the file). IoError on a read error.
  virtual StatusOr<size_t> ReadAt(uint64_t offset, std::span<char> out) const = 0;
  // Like ReadAt, but bypassing the OS page cache where it can (O_DIRECT): for a caller that keeps
  // the bytes in a cache of its own, so the kernel neither copies them once more nor keeps a
  // second copy in memory. Any part of the read that cannot go around the cache (a misaligned
  // buffer or range, a tail shorter than kDirectIoAlignment, a file system without O_DIRECT) is
  // read as ReadAt reads it: the result is always ReadAt's. This default is ReadAt.
  virtual StatusOr<size_t> ReadDirectAt(uint64_t offset, std::span<char> out) const {
    return ReadAt(offset, out);
  }
  // The current size of the file.
  virtual StatusOr<uint64_t> Size() const = 0;
  // The OS file descriptor (valid as long as this object lives), or -1 if not a real file.
  virtual int native_fd() const = 0;
};

// Held while a folder is in use; releasing it (destruction) lets another process take it.
class DiskLock {
 public:
  virtual ~DiskLock() = default;
};

struct FileInfo {
  bool is_dir = false;
  bool is_regular = false;
  uint32_t mode = 0;  // Permission bits (07777).
  uint64_t size = 0;
};

struct DirEntry {
  std::string name;
  bool is_dir = false;
  bool is_regular = false;
  uint64_t size = 0;  // Regular files only.
};

class Disk {
 public:
  virtual ~Disk() = default;

  // Creates directory `path` (its parent must exist) with mode exactly 0700, whatever the umask.
  // OK if it already exists as a directory (its mode is left alone). FailedPrecondition if it
  // exists as something else; NotFound if the parent is missing.
  virtual Status CreateDir(const std::string& path) = 0;

  // Information on `path`, following symbolic links. NotFound if absent.
  virtual StatusOr<FileInfo> Stat(const std::string& path) = 0;

  // OK if this process may create and delete entries in directory `path`. PermissionDenied if not
  // (including a read-only file system).
  virtual Status CheckWritable(const std::string& path) = 0;

  // Opens a regular file for reading. NotFound if absent. The caller owns the result.
  virtual StatusOr<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) = 0;

  // Creates `path` (mode 0600; AlreadyExists if it exists) and writes `pieces` one after the other.
  // Not synced. On any error the partial file is removed before returning.
  virtual Status WriteNewFile(const std::string& path,
                              std::span<const std::span<const char>> pieces) = 0;

  // Atomically replaces `to` (if present) with `from`; both in the same directory.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;

  // Removes a file. NotFound if absent.
  virtual Status Unlink(const std::string& path) = 0;

  // The entries of directory `path` (no "." or ".."), in no particular order, with the sizes of
  // regular files. Symbolic links are reported as neither directory nor regular file.
  virtual StatusOr<std::vector<DirEntry>> ListDir(const std::string& path) = 0;

  // Bytes in use on the whole file system holding `path` (by anyone), an upper bound of what any
  // folder on it occupies.
  virtual StatusOr<uint64_t> FileSystemUsedBytes(const std::string& path) = 0;

  // Takes an exclusive advisory lock on file `path` (created if missing), held until the returned
  // object is destroyed or the process dies. FailedPrecondition if someone else holds it.
  virtual StatusOr<std::unique_ptr<DiskLock>> LockFile(const std::string& path) = 0;
};

// Forwards every call to `target`: subclass it to inject faults or count calls.
class DiskWrapper : public Disk {
 public:
  explicit DiskWrapper(std::shared_ptr<Disk> target) : target_(std::move(target)) {}
  Status CreateDir(const std::string& path) override { return target_->CreateDir(path); }
  StatusOr<FileInfo> Stat(const std::string& path) override { return target_->Stat(path); }
  Status CheckWritable(const std::string& path) override { return target_->CheckWritable(path); }
  StatusOr<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    return target_->OpenForRead(path);
  }
  Status WriteNewFile(const std::string& path,
                      std::span<const std::span<const char>> pieces) override {
    return target_->WriteNewFile(path, pieces);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    return target_->Rename(from, to);
  }
  Status Unlink(const std::string& path) override { return target_->Unlink(path); }
  StatusOr<std::vector<DirEntry>> ListDir(const std::string& path) override {
    return target_->ListDir(path);
  }
  StatusOr<uint64_t> FileSystemUsedBytes(const std::string& path) override {
    return target_->FileSystemUsedBytes(path);
  }
  StatusOr<std::unique_ptr<DiskLock>> LockFile(const std::string& path) override {
    return target_->LockFile(path);
  }

 protected:
  Disk& target() { return *target_; }

 private:
  std::shared_ptr<Disk> target_;
};

// The real local file system (POSIX calls). Stateless; one shared instance.
std::shared_ptr<Disk> PosixDisk();

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_DISK_H_
