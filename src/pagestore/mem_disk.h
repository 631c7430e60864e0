// MemDisk: an in-memory Disk for fast, hermetic unit tests.
//
// Files are immutable byte strings shared with the readers that opened them, so a reader keeps
// seeing the file it opened after an unlink or a rename over it, as on POSIX. Directories carry a
// mode; "/" always exists (mode 0755). native_fd() of its files is -1.
//
// Thread-safety: all methods are thread-safe.
#ifndef CAIRN_PAGESTORE_MEM_DISK_H_
#define CAIRN_PAGESTORE_MEM_DISK_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "common/thread_annotations.h"
#include "pagestore/disk.h"

namespace cairn::pagestore {

class MemDisk final : public Disk {
 public:
  MemDisk();

  Status CreateDir(const std::string& path) override;
  StatusOr<FileInfo> Stat(const std::string& path) override;
  Status CheckWritable(const std::string& path) override;
  StatusOr<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override;
  Status WriteNewFile(const std::string& path,
                      std::span<const std::span<const char>> pieces) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Unlink(const std::string& path) override;
  StatusOr<std::vector<DirEntry>> ListDir(const std::string& path) override;
  // Files rounded up to 4 KiB blocks plus one block per directory (what `du` would report).
  StatusOr<uint64_t> FileSystemUsedBytes(const std::string& path) override;
  StatusOr<std::unique_ptr<DiskLock>> LockFile(const std::string& path) override;

  // Test helpers. SetMode: NotFound if `path` does not exist.
  Status SetMode(const std::string& path, uint32_t mode);
  // The contents of a file; NotFound if absent.
  StatusOr<std::string> ReadFile(const std::string& path) const;
  // Creates or overwrites a file directly (simulating damage or leftovers from a crash). The
  // parent directory must exist.
  Status PutFile(const std::string& path, std::string contents);
  // Every file path, sorted.
  std::vector<std::string> ListAllFiles() const;

 private:
  friend class MemDiskLock;
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_MEM_DISK_H_
