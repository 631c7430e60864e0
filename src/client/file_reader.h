// FileReaderImpl: an open file pinned to one object version, with adaptive readahead.
//
// Readahead: a read that starts where the previous one ended extends a sequential streak; the
// window of whole pages fetched ahead in the background doubles with the streak (1, 2, 4, ...)
// up to max_readahead_pages. A random read resets it, so random readers fetch only the 4 KiB
// chunks they touch. Fetched-ahead pages land in the client's PageBuffer, where any reader of the
// same object version finds them. With ClientOptions::unbuffered_small_files, a one-page object
// read whole skips the buffer: its bytes go straight into the caller's memory.
// Thread-safety: thread-safe (FUSE may call Read for one open file from several threads).
#ifndef CAIRN_CLIENT_FILE_READER_H_
#define CAIRN_CLIENT_FILE_READER_H_

#include <cstdint>

#include "cairn/client.h"
#include "client/page_buffer.h"
#include "client/page_fetcher.h"
#include "common/thread_annotations.h"
#include "common/thread_pool.h"

namespace cairn::client {

struct ReadContext {
  PageFetcher* fetcher;
  PageBuffer* buffer;
  ThreadPool* prefetch_pool;
  uint32_t max_readahead_pages;
  std::atomic<uint64_t>* buffer_hits;
  std::atomic<uint64_t>* unbuffered_reads;  // One-page objects read whole past the buffer.
  bool unbuffered_small_files;              // ClientOptions::unbuffered_small_files.
};

class FileReaderImpl : public FileReader {
 public:
  FileReaderImpl(ObjectRef object, ReadContext context)
      : object_(std::move(object)), ctx_(context) {}

  const FileInfo& info() const override { return object_.info; }
  StatusOr<size_t> Read(uint64_t offset, std::span<char> out) override;
  // Pieces already in the page buffer are returned in place (the view holds their slots).
  StatusOr<ReadView> ReadInPlace(uint64_t offset, std::span<char> scratch) override;

 private:
  // Window (in pages) for a read of [offset, offset+n); updates the streak.
  uint32_t UpdateStreak(uint64_t offset, size_t n) EXCLUDES(mu_);
  void StartReadahead(uint64_t first_page, uint32_t window);
  // Read and ReadInPlace: with `view` null, copies every byte into `out`; otherwise appends
  // each piece to `view`, in place when buffered, else read into `out`.
  StatusOr<size_t> ReadPieces(uint64_t offset, std::span<char> out, ReadView* view);
  // Reads one piece (within one page). When the page is in the page buffer (or is fetched into
  // it now), returns its slot and leaves `out` untouched; otherwise reads into `out`, returns null.
  StatusOr<std::shared_ptr<const PageBuffer::Slot>> ReadPiece(uint64_t page, uint32_t in_page,
                                                              std::span<char> out, bool sequential);
  Hash128 PageId(uint64_t page) const;
  uint64_t PageCount() const;

  const ObjectRef object_;
  const ReadContext ctx_;
  Mutex mu_;
  uint64_t next_offset_ GUARDED_BY(mu_) = 0;
  uint32_t streak_ GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_FILE_READER_H_
