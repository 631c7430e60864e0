// Page files on a Disk: the cheap open-time check and the PageReader over an open page file.
// Thread-safety: functions are thread-safe; a FilePageReader is safe for concurrent reads.
#ifndef CAIRN_PAGESTORE_PAGE_FILE_H_
#define CAIRN_PAGESTORE_PAGE_FILE_H_

#include <memory>
#include <string>
#include <string_view>

#include "pagestore/disk.h"
#include "pagestore/page_format.h"
#include "pagestore/page_store.h"

namespace cairn::pagestore {

class FilePageReader final : public PageReader {
 public:
  FilePageReader(std::unique_ptr<RandomAccessFile> file, PageHeader header)
      : file_(std::move(file)), header_(std::move(header)) {}

  uint32_t data_length() const override { return header_.data_length; }
  const std::vector<uint64_t>& chunk_checksums() const override { return header_.chunk_checksums; }
  Status ReadAt(uint32_t offset, std::span<char> out) const override;
  Status ReadDirectAt(uint32_t offset, std::span<char> out) const override;
  int native_fd() const override { return file_->native_fd(); }
  uint64_t data_file_offset() const override { return header_.data_offset; }

  const PageHeader& header() const { return header_; }
  // True if the file still has the size its header promises (one fstat): a kept-open file is
  // checked so before every use, so a page file truncated after it was opened is caught before
  // a byte of it is sent.
  bool StillWhole() const;
  // StillWhole, and `path` still names this very file (an fstat and a stat more). A kept-open
  // file is checked so at least once a second (CacheDir::kOpenFileRecheckMicros), so a page
  // file replaced or swapped under its name is caught, and the name is then reopened and checked
  // in full.
  bool StillAt(const std::string& path) const;

 private:
  Status Read(uint32_t offset, std::span<char> out, bool direct) const;

  std::unique_ptr<RandomAccessFile> file_;
  PageHeader header_;
};

// Opens the page file at `path` and checks, without reading the data, that it holds the page
// whose serialized key is `serialized_key`: the header parses and its checksum matches, the key
// bytes and page index are equal, and the file size is data_offset + data_length.
// A page file of format version 1 (64 KiB chunks, written by earlier builds) is read whole once
// here: its data is verified against its own checksums and the reader gets 4 KiB ones, so every
// caller sees kChecksumChunkSize chunks (the file itself is left as it is; it costs that read at
// each open until the page is evicted or rewritten).
// Returns NotFound if there is no file, Corruption if the file is not a valid copy of that page
// (truncated, extended, another key, garbage, or version-1 data that fails its checksums),
// IoError if reading failed.
StatusOr<std::unique_ptr<FilePageReader>> OpenPageFile(Disk& disk, const std::string& path,
                                                       std::string_view serialized_key,
                                                       uint64_t page_index);

// Reads and checks the header of the page file at `path` (format, lengths, header checksum) and
// returns the serialized key it holds, without checking the file's size or which page its name
// says it is (the recovery scan learns object ids this way: one open and one 4 KiB read).
// NotFound if there is no file, Corruption if the header is not valid, IoError if reading failed.
StatusOr<std::string> ReadPageKey(Disk& disk, const std::string& path);

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_PAGE_FILE_H_
