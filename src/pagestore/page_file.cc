#include "pagestore/page_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <vector>

namespace cairn::pagestore {

Status FilePageReader::Read(uint32_t offset, std::span<char> out, bool direct) const {
  if (offset > header_.data_length || out.size() > header_.data_length - offset) {
    return InvalidArgumentError("read of " + std::to_string(out.size()) + " bytes at " +
                                std::to_string(offset) + " is past the page end (" +
                                std::to_string(header_.data_length) + " bytes)");
  }
  // data_offset is a multiple of kPageAlignment (4 KiB): a chunk-aligned range of the data is
  // block-aligned in the file, as O_DIRECT wants.
  const uint64_t at = uint64_t{header_.data_offset} + offset;
  const bool around_cache = direct && out.size() >= kDirectReadMinBytes;
  CAIRN_ASSIGN_OR_RETURN(size_t n,
                         around_cache ? file_->ReadDirectAt(at, out) : file_->ReadAt(at, out));
  if (n != out.size()) return IoError("short read: the page file was truncated");
  return Status::Ok();
}

Status FilePageReader::ReadAt(uint32_t offset, std::span<char> out) const {
  return Read(offset, out, /*direct=*/false);
}

Status FilePageReader::ReadDirectAt(uint32_t offset, std::span<char> out) const {
  return Read(offset, out, /*direct=*/true);
}

bool FilePageReader::StillWhole() const {
  auto size = file_->Size();
  return size.ok() && *size == header_.file_size();
}

bool FilePageReader::StillAt(const std::string& path) const {
  if (!StillWhole()) return false;
  const int fd = file_->native_fd();
  if (fd < 0) return true;  // In-memory disk: names cannot be swapped under an open file.
  struct stat open_st {
  }, named_st{};
  if (::fstat(fd, &open_st) != 0 || ::stat(path.c_str(), &named_st) != 0) return false;
  return open_st.st_ino == named_st.st_ino && open_st.st_dev == named_st.st_dev;
}

namespace {

// Reads and decodes the header at the start of `file`.
StatusOr<PageHeader> ReadHeader(const RandomAccessFile& file) {
  // One read covers the whole header of any page whose key is shorter than ~4 KiB minus the
  // checksum array: the common case costs open + pread + fstat.
  std::vector<char> buf(kPageAlignment);
  CAIRN_ASSIGN_OR_RETURN(size_t n, file.ReadAt(0, buf));
  CAIRN_ASSIGN_OR_RETURN(uint32_t header_length,
                         PeekHeaderLength(std::span<const char>(buf.data(), n)));
  if (header_length > n) {
    if (n < buf.size()) return CorruptionError("page header truncated");
    buf.resize(header_length);
    CAIRN_ASSIGN_OR_RETURN(size_t more,
                           file.ReadAt(n, std::span<char>(buf.data() + n, header_length - n)));
    if (more != header_length - n) return CorruptionError("page header truncated");
    n = header_length;
  }
  return DecodePageHeader(std::span<const char>(buf.data(), n));
}

// Verifies a version-1 page's data against its 64 KiB checksums and replaces them in `header`
// with kChecksumChunkSize ones.
Status RechunkVersion1(const RandomAccessFile& file, PageHeader* header) {
  std::vector<char> buf(std::min(header->data_length, kVersion1ChunkSize));
  std::vector<uint64_t> sums;
  sums.reserve(ChunkCount(header->data_length));
  for (uint32_t chunk = 0; chunk < header->chunk_checksums.size(); ++chunk) {
    const uint32_t offset = chunk * kVersion1ChunkSize;
    std::span<char> piece(buf.data(), std::min(kVersion1ChunkSize, header->data_length - offset));
    CAIRN_ASSIGN_OR_RETURN(size_t n, file.ReadAt(uint64_t{header->data_offset} + offset, piece));
    if (n != piece.size()) return CorruptionError("page file truncated");
    if (Checksum64(piece) != header->chunk_checksums[chunk]) {
      return CorruptionError("page data checksum mismatch in chunk " + std::to_string(chunk) +
                             " (format 1)");
    }
    for (uint64_t sum : ChunkChecksums(piece)) sums.push_back(sum);
  }
  header->chunk_checksums = std::move(sums);
  header->chunk_size = kChecksumChunkSize;
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<FilePageReader>> OpenPageFile(Disk& disk, const std::string& path,
                                                       std::string_view serialized_key,
                                                       uint64_t page_index) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, disk.OpenForRead(path));
  CAIRN_ASSIGN_OR_RETURN(PageHeader header, ReadHeader(*file));
  if (header.serialized_key != serialized_key || header.page_index != page_index) {
    return CorruptionError("page file holds another page");
  }
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size != header.file_size()) {
    return CorruptionError("page file is " + std::to_string(size) + " bytes, header says " +
                           std::to_string(header.file_size()));
  }
  if (header.chunk_size != kChecksumChunkSize) {
    CAIRN_RETURN_IF_ERROR(RechunkVersion1(*file, &header));
  }
  return std::make_unique<FilePageReader>(std::move(file), std::move(header));
}

StatusOr<std::string> ReadPageKey(Disk& disk, const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, disk.OpenForRead(path));
  CAIRN_ASSIGN_OR_RETURN(PageHeader header, ReadHeader(*file));
  return std::move(header.serialized_key);
}

Status VerifyPage(const PageReader& reader) {
  const uint32_t length = reader.data_length();
  const std::vector<uint64_t>& sums = reader.chunk_checksums();
  if (sums.size() != ChunkCount(length)) {
    return CorruptionError("page has " + std::to_string(sums.size()) + " chunk checksums for " +
                           std::to_string(length) + " bytes");
  }
  std::vector<char> buf(std::min<uint32_t>(length, kChecksumChunkSize));
  for (uint32_t chunk = 0; chunk < sums.size(); ++chunk) {
    uint32_t offset = chunk * kChecksumChunkSize;
    std::span<char> piece(buf.data(), std::min<uint32_t>(kChecksumChunkSize, length - offset));
    CAIRN_RETURN_IF_ERROR(reader.ReadAt(offset, piece));
    if (Checksum64(piece) != sums[chunk]) {
      return CorruptionError("page data checksum mismatch in chunk " + std::to_string(chunk));
    }
  }
  return Status::Ok();
}

}  // namespace cairn::pagestore
