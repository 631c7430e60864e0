// DirStream: random access by position into a directory listing that the client serves in
// pages (Client::ListDir with continuation tokens), holding one page in memory at a time.
//
// FUSE readdir asks for "the entries from offset N on" in small batches (one kernel buffer, a
// few dozen to a few hundred entries), and may seek (rewinddir, seekdir, NFS-style restarts).
// DirStream keeps the page that covers the last position asked for, plus one checkpoint per
// page seen: (index of the page's first entry, token that lists that page). A forward read
// walks the pages in order, so a full listing costs one ListDir call per page; a seek backwards
// restarts from the nearest checkpoint at or before the target, never from an earlier page.
//
// Consistency: positions are stable as long as the listing does not change between page loads.
// If it does (the directory changed and the client's listing cache expired), a re-read page
// rebuilds the checkpoints after it; entries may then be seen twice or not at all, exactly the
// latitude POSIX gives readdir on a directory that changes while it is read.
//
// Entries whose names the kernel cannot represent ("", ".", "..", names containing '/' or NUL)
// are skipped with a warning, before positions are assigned.
//
// Thread-safety: not thread-safe; the FUSE layer serializes calls per open directory.
#ifndef CAIRN_FUSE_DIR_STREAM_H_
#define CAIRN_FUSE_DIR_STREAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cairn/client.h"
#include "common/status.h"

namespace cairn::fuse {

class DirStream {
 public:
  // `client` is not owned and must outlive the stream. `page_entries` (>= 1) is the
  // max_entries passed to every ListDir call.
  DirStream(Client* client, std::string path, int page_entries);

  DirStream(const DirStream&) = delete;
  DirStream& operator=(const DirStream&) = delete;

  // Loads the first page, so that opening a directory reports NotFound/PermissionDenied/...
  // right away. Returns the client's error unchanged.
  Status Start();

  // The entry at listing position `index` (0-based; the first entry of the first page is 0).
  // Success: a pointer valid until the next call on this stream, or nullptr when `index` is at
  // or past the end of the listing. Errors: the client's ListDir error; Internal when the
  // client returns an empty page whose continuation token equals the one it was given (a
  // listing that can never make progress).
  StatusOr<const FileInfo*> At(uint64_t index);

  const std::string& path() const { return path_; }
  // ListDir calls made so far (for tests and metrics).
  uint64_t pages_loaded() const { return pages_loaded_; }

 private:
  struct Checkpoint {
    uint64_t start;     // Listing position of the page's first entry.
    std::string token;  // Token that lists the page ("" for the first).
  };

  // Lists page number `page` (its checkpoint must exist) and makes it current.
  Status LoadPage(size_t page);

  Client* const client_;
  const std::string path_;
  const int page_entries_;

  std::vector<Checkpoint> checkpoints_;  // checkpoints_[k] describes page k.
  bool loaded_ = false;
  size_t page_ = 0;  // Number of the current page.
  std::vector<FileInfo> entries_;
  std::string next_token_;  // Token of page_ + 1; empty when page_ is the last one.
  uint64_t pages_loaded_ = 0;
};

// True when `name` can be a directory entry name on Linux: not empty, not "." or "..", no '/'
// or NUL byte.
bool IsRepresentableName(std::string_view name);

}  // namespace cairn::fuse

#endif  // CAIRN_FUSE_DIR_STREAM_H_
