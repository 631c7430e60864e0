#include "write/write_session.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "common/checksum.h"

namespace cairn::write {
namespace {

// PartHash hashes a part in pieces of this size, so a part read back in bounded buffers hashes
// the same as one held whole.
constexpr uint64_t kHashPiece = kPartHashPiece;
// What HashSpool reads at a time (fits in a core's L2 cache).
constexpr size_t kHashReadBytes = 256 << 10;
// CopySpoolFile's buffer where the kernel cannot copy.
constexpr uint64_t kCopyBytes = 4 << 20;
// Pool tasks that help HashPrefix's caller: one, so that a pool of the worker's two threads
// keeps one for the other files' background hashes.
constexpr uint32_t kPrefixHashHelpers = 1;

void AppendLe64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

StatusOr<std::string> CopySpoolFile(int from_fd, uint64_t size, const std::string& spool_dir) {
  std::string path = spool_dir + "/write-XXXXXX";
  const int to = ::mkostemp(path.data(), O_CLOEXEC);
  if (to < 0) return ErrnoToStatus(errno, "create spool file in " + spool_dir);
  Status copied = Status::Ok();
  loff_t in = 0;
  loff_t out = 0;
  bool by_kernel = true;
  std::vector<char> chunk;
  while (static_cast<uint64_t>(out) < size && copied.ok()) {
    const uint64_t left = size - static_cast<uint64_t>(out);
    ssize_t n = -1;
    if (by_kernel) {
      n = ::copy_file_range(from_fd, &in, to, &out,
                            static_cast<size_t>(std::min<uint64_t>(left, 1ULL << 30)), 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
                    errno == EPERM)) {
        // Not here (an old kernel, another file system, a container's seccomp profile that
        // refuses the call with EPERM): the loop below.
        by_kernel = false;
        continue;
      }
    } else {
      if (chunk.empty()) chunk.resize(std::min<uint64_t>(left, kCopyBytes));
      n = ::pread(from_fd, chunk.data(), std::min<uint64_t>(left, chunk.size()), in);
      if (n > 0) {
        for (ssize_t done = 0; done < n && copied.ok();) {
          const ssize_t w =
              ::pwrite(to, chunk.data() + done, static_cast<size_t>(n - done), out + done);
          if (w < 0 && errno != EINTR) copied = ErrnoToStatus(errno, "write spool file " + path);
          if (w > 0) done += w;
        }
        in += n;
        out += n;
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && copied.ok()) copied = ErrnoToStatus(errno, "copy into spool file " + path);
    if (n == 0) break;  // The source ends here: the rest is a hole of zeros.
  }
  if (copied.ok() && ::ftruncate(to, static_cast<off_t>(size)) != 0) {
    copied = ErrnoToStatus(errno, "size spool file " + path);
  }
  ::close(to);
  if (!copied.ok()) {
    ::unlink(path.c_str());
    return copied;
  }
  return path;
}

Status PartHasher::Update(std::span<const char> piece) {
  if (ended_) return InvalidArgumentError("a part hashed in pieces went on after a short one");
  for (uint64_t at = 0; at < piece.size(); at += kHashPiece) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kHashPiece, piece.size() - at));
    AppendLe64(&piece_hashes_, Hash64(std::string_view(piece.data() + at, n)));
  }
  ended_ = piece.size() % kHashPiece != 0;
  return Status::Ok();
}

uint64_t PartHasher::Finish() const { return Hash64(piece_hashes_); }

uint64_t PartHash(std::span<const char> part) {
  PartHasher hasher;
  hasher.Update(part).IgnoreError();  // One piece: always fine.
  return hasher.Finish();
}

uint64_t CombinePartHashes(const std::vector<uint64_t>& part_hashes) {
  std::string all;
  all.reserve(part_hashes.size() * 8);
  for (uint64_t h : part_hashes) AppendLe64(&all, h);
  return Hash64(all);
}

StatusOr<std::unique_ptr<WriteSession>> WriteSession::Create(std::shared_ptr<ufs::UnderStorage> ufs,
                                                             std::string key,
                                                             const std::string& spool_dir,
                                                             WriteSessionOptions options,
                                                             ThreadPool* uploads) {
  if (options.max_uploads_in_flight < 1) {
    return InvalidArgumentError("max_uploads_in_flight must be at least 1");
  }
  if (options.whole_put_bytes > ufs::PartLayout::kMaxBase) {
    return InvalidArgumentError("whole_put_bytes must be at most " +
                                std::to_string(ufs::PartLayout::kMaxBase));
  }
  CAIRN_ASSIGN_OR_RETURN(ufs::PartLayout layout, ufs::PartLayout::Create(options.part_size));
  ufs::WriterOptions writer_options;
  writer_options.part_size = options.part_size;
  writer_options.condition = options.condition;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<ufs::ObjectWriter> writer,
                         ufs->StartWrite(key, writer_options));
  std::string path = spool_dir + "/write-XXXXXX";
  int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "create spool file in " + spool_dir);
  return std::unique_ptr<WriteSession>(
      new WriteSession(std::move(ufs), std::move(key), std::move(path), fd, layout,
                       std::move(options), uploads, std::move(writer)));
}

StatusOr<std::unique_ptr<WriteSession>> WriteSession::OpenSpool(
    std::shared_ptr<ufs::UnderStorage> ufs, std::string key, std::string spool_path, uint64_t size,
    WriteSessionOptions options, ThreadPool* uploads) {
  if (options.max_uploads_in_flight < 1) {
    return InvalidArgumentError("max_uploads_in_flight must be at least 1");
  }
  if (options.whole_put_bytes > ufs::PartLayout::kMaxBase) {
    return InvalidArgumentError("whole_put_bytes must be at most " +
                                std::to_string(ufs::PartLayout::kMaxBase));
  }
  CAIRN_ASSIGN_OR_RETURN(ufs::PartLayout layout, ufs::PartLayout::Create(options.part_size));
  if (size > layout.MaxSize()) {
    return CorruptionError("spool file " + spool_path + " claims " + std::to_string(size) +
                           " bytes, past the largest object");
  }
  const int fd = ::open(spool_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "open spool file " + spool_path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < size) {
    ::close(fd);
    return CorruptionError("spool file " + spool_path + " is shorter than the " +
                           std::to_string(size) + " bytes it holds");
  }
  ufs::WriterOptions writer_options;
  writer_options.part_size = options.part_size;
  writer_options.condition = options.condition;
  StatusOr<std::unique_ptr<ufs::ObjectWriter>> writer = ufs->StartWrite(key, writer_options);
  if (!writer.ok()) {
    ::close(fd);
    return writer.status();
  }
  return std::unique_ptr<WriteSession>(
      new WriteSession(std::move(ufs), std::move(key), std::move(spool_path), fd, layout,
                       std::move(options), uploads, std::move(*writer)));
}

StatusOr<std::unique_ptr<WriteSession>> WriteSession::Adopt(std::shared_ptr<ufs::UnderStorage> ufs,
                                                            std::string key, std::string spool_path,
                                                            uint64_t size,
                                                            WriteSessionOptions options,
                                                            ThreadPool* uploads) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<WriteSession> session,
                         OpenSpool(std::move(ufs), std::move(key), std::move(spool_path), size,
                                   std::move(options), uploads));
  MutexLock lock(&session->mu_);
  if (size > 0) CAIRN_RETURN_IF_ERROR(session->written_.Add(0, size));
  session->size_ = size;
  session->closing_ = true;  // Sealed: the bytes are what was made durable.
  session->digest_ = session->options_.expected_digest;
  return session;
}

StatusOr<std::unique_ptr<WriteSession>> WriteSession::Reopen(std::shared_ptr<ufs::UnderStorage> ufs,
                                                             std::string key,
                                                             std::string spool_path, uint64_t size,
                                                             WriteSessionOptions options,
                                                             ThreadPool* uploads) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<WriteSession> session,
                         OpenSpool(std::move(ufs), std::move(key), std::move(spool_path), size,
                                   std::move(options), uploads));
  Status ready = Status::Ok();
  if (::ftruncate(session->spool_fd_, static_cast<off_t>(size)) != 0) {
    ready = ErrnoToStatus(errno, "cut spool file " + session->spool_path_);
  }
  StatusOr<std::vector<uint64_t>> hashes = std::vector<uint64_t>();
  if (ready.ok()) {
    hashes = session->CheckReopened(size);
    ready = hashes.status();
  }
  if (ready.ok() && size > 0) {
    MutexLock lock(&session->mu_);
    ready = session->written_.Add(0, size);
    if (ready.ok()) {
      session->size_ = size;
      const bool checked = !hashes->empty();
      session->TouchParts(0, *session->layout_.PartOf(size - 1), /*hash=*/!checked);
      for (uint32_t i = 0; checked && i < hashes->size(); ++i) {
        // Whole parts only: the last one's hash is of its bytes cut at `size`, not of the part
        // that a write past the end would make of it.
        if (session->layout_.Offset(i) + session->layout_.Size(i) > size) break;
        Part& part = session->parts_[i];
        part.hashed = true;
        part.hashed_generation = part.generation;
        part.hash = (*hashes)[i];
      }
      session->Pump();
    }
  }
  if (!ready.ok()) {
    session->KeepSpoolFile();  // Still the caller's.
    return ready;
  }
  // A copied file's pages are not on disk yet: start their write now, as writes would have
  // (write_behind_bytes), so that a Seal finds little left.
  session->StartWriteBehind(size);
  return session;
}

WriteSession::WriteSession(std::shared_ptr<ufs::UnderStorage> ufs, std::string key,
                           std::string spool_path, int spool_fd, ufs::PartLayout layout,
                           WriteSessionOptions options, ThreadPool* uploads,
                           std::unique_ptr<ufs::ObjectWriter> writer)
    : ufs_(std::move(ufs)),
      key_(std::move(key)),
      spool_path_(std::move(spool_path)),
      spool_fd_(spool_fd),
      layout_(layout),
      options_(std::move(options)),
      uploads_(uploads),
      writer_(std::move(writer)),
      condition_(options_.condition) {}

WriteSession::~WriteSession() {
  {
    MutexLock lock(&mu_);
    closing_ = true;
    queued_.clear();
    WaitForUploads();
  }
  // The writer's destructor aborts an uncommitted upload.
  {
    MutexLock lock(&mu_);
    writer_.reset();
  }
  ::close(spool_fd_);
  if (!keep_spool_) ::unlink(spool_path_.c_str());
}

Status WriteSession::CheckOpen() const {
  if (closing_) {
    return FailedPreconditionError("write of '" + key_ + "' is " +
                                   (committed_ ? "committed"
                                    : aborted_ ? "aborted"
                                               : "closing"));
  }
  return Status::Ok();
}

Status WriteSession::Write(uint64_t offset, std::span<const char> data) {
  if (data.empty()) return Status::Ok();
  if (offset >= layout_.MaxSize() || data.size() > layout_.MaxSize() - offset) {
    return InvalidArgumentError("a write at " + std::to_string(offset) + " of " +
                                std::to_string(data.size()) + " bytes passes the largest object (" +
                                std::to_string(layout_.MaxSize()) + " bytes)");
  }
  {
    MutexLock lock(&mu_);
    CAIRN_RETURN_IF_ERROR(CheckOpen());
  }
  // Outside the lock: concurrent writes are concurrent pwrites. An upload that reads the spool
  // meanwhile may see these bytes or not; the generation bump below makes it count as stale.
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(spool_fd_, data.data() + done, data.size() - done,
                         static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "write spool file of '" + key_ + "'");
    }
    done += static_cast<size_t>(n);
  }
  StartWriteBehind(data.size());
  const uint64_t end = offset + data.size();
  MutexLock lock(&mu_);
  // A Commit that started meanwhile did not wait for these bytes: they may or may not be in the
  // object, as with a write racing close(2). Still refuse, so the caller knows.
  CAIRN_RETURN_IF_ERROR(CheckOpen());
  // Even if the range cannot be recorded, the bytes are in the spool: the parts must count as
  // changed (sent again at Commit), or a part that already went up would keep its old bytes.
  Status recorded = written_.Add(offset, data.size());
  const uint64_t old_size = size_;
  size_ = std::max(size_, end);
  TouchParts(*layout_.PartOf(offset), *layout_.PartOf(end - 1));
  QueueOnceEarly(old_size);
  Pump();
  return recorded;
}

void WriteSession::StartWriteBehind(uint64_t written) {
  if (options_.write_behind_bytes == 0) return;
  if (unflushed_bytes_.fetch_add(written) + written < options_.write_behind_bytes) return;
  unflushed_bytes_ = 0;
  ++write_behinds_;
  // The whole file: random-offset writers leave dirty pages anywhere. Pages already under
  // write-out are skipped. A failure here is not the write's: Seal's fdatasync reports it.
  if (::sync_file_range(spool_fd_, 0, 0, SYNC_FILE_RANGE_WRITE) != 0) {
    spdlog::debug("write-behind of the spool file of '{}': {}", key_, std::strerror(errno));
  }
}

Status WriteSession::Truncate(uint64_t size) {
  if (size > layout_.MaxSize()) {
    return InvalidArgumentError("size " + std::to_string(size) + " passes the largest object (" +
                                std::to_string(layout_.MaxSize()) + " bytes)");
  }
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(CheckOpen());
  if (::ftruncate(spool_fd_, static_cast<off_t>(size)) != 0) {
    return ErrnoToStatus(errno, "truncate spool file of '" + key_ + "'");
  }
  const uint64_t old_size = size_;
  Status recorded = Status::Ok();
  if (size < old_size) {
    written_.TruncateTo(size);
  } else {
    // The new bytes are zeros, as written as any other.
    recorded = written_.Add(old_size, size - old_size);
  }
  size_ = size;
  const uint64_t lo = std::min(old_size, size);
  const uint64_t hi = std::max(old_size, size);
  if (hi > lo) TouchParts(*layout_.PartOf(lo), *layout_.PartOf(hi - 1));
  QueueOnceEarly(old_size);
  Pump();
  return recorded;
}

Status WriteSession::Seal() {
  MutexLock lock(&mu_);
  if (aborted_) return FailedPreconditionError("write of '" + key_ + "' was aborted");
  closing_ = true;
  if (options_.digest && !digest_) CAIRN_RETURN_IF_ERROR(MakeDigest());
  if (::fdatasync(spool_fd_) != 0) return ErrnoToStatus(errno, "sync spool file of '" + key_ + "'");
  return Status::Ok();
}

uint64_t WriteSession::size() const {
  MutexLock lock(&mu_);
  return size_;
}

StatusOr<size_t> WriteSession::ReadAt(uint64_t offset, std::span<char> out) const {
  const uint64_t size = this->size();
  if (offset >= size) return 0;
  const size_t want = static_cast<size_t>(std::min<uint64_t>(out.size(), size - offset));
  // Outside the lock, as writes are: a read racing a write sees either bytes, as with pread.
  CAIRN_RETURN_IF_ERROR(ReadSpool(offset, out.first(want)));
  return want;
}

void WriteSession::TouchParts(uint32_t first, uint32_t last, bool hash) {
  for (uint32_t i = first; i <= last; ++i) {
    Part& part = parts_[i];
    ++part.generation;
    const uint64_t begin = layout_.Offset(i);
    const uint64_t end = begin + layout_.Size(i);
    // Only full parts go early; the final one waits for Commit.
    const bool whole = end <= size_ && written_.Covers(begin, end);
    if (SendsEarly() && !part.sending && whole) queued_.insert(i);
    // Hashed now, while its bytes are likely in the page cache; a later write into it makes
    // the hash stale, and Seal hashes it again.
    if (hash && options_.digest && options_.hash_pool != nullptr && !closing_ && !part.hashing &&
        whole) {
      part.hashing = true;
      ++hashing_;
      const uint64_t generation = part.generation;
      options_.hash_pool->Submit([this, i, generation] { HashPart(i, generation); });
    }
  }
}

bool WriteSession::SendsEarly() const {
  return options_.upload_early && size_ > options_.whole_put_bytes;
}

void WriteSession::QueueOnceEarly(uint64_t old_size) {
  if (!SendsEarly() || old_size > options_.whole_put_bytes) return;
  // The file just grew past whole_put_bytes: the parts written before went nowhere yet.
  for (uint32_t i = 0; i < ufs::PartLayout::kMaxParts; ++i) {
    const uint64_t begin = layout_.Offset(i);
    const uint64_t end = begin + layout_.Size(i);
    if (end > size_) break;
    if (!written_.Covers(begin, end)) continue;
    auto part = parts_.find(i);  // Every wholly written part has an entry (TouchParts).
    if (part != parts_.end() && !part->second.sending && !part->second.UpToDate()) {
      queued_.insert(i);
    }
  }
}

void WriteSession::HashPart(uint32_t index, uint64_t generation) {
  StatusOr<uint64_t> hash = HashSpool(layout_.Offset(index), layout_.Size(index));
  MutexLock lock(&mu_);
  Part& part = parts_[index];
  part.hashing = false;
  --hashing_;
  if (hash.ok() && part.generation == generation) {
    part.hashed = true;
    part.hashed_generation = generation;
    part.hash = *hash;
    ++stats_.parts_hashed_early;
  }
  uploads_done_.NotifyAll();
}

StatusOr<uint64_t> WriteSession::HashSpool(uint64_t offset, uint64_t length) const {
  // Read in small pieces into one buffer per thread, kept for its next part: a buffer of a whole
  // kHashPiece, allocated and zeroed for each part, cost as much as the hashing (a profile of a
  // 1 GiB write-back write), and the bytes now stay in the CPU's cache between read and hash.
  thread_local std::unique_ptr<char[]> buffer(new char[kHashReadBytes]);
  std::string pieces;
  for (uint64_t at = 0; at < length; at += kHashPiece) {
    const uint64_t n = std::min<uint64_t>(kHashPiece, length - at);
    Hash64Stream piece;  // Hash64 of the piece, as the digest format defines it.
    for (uint64_t done = 0; done < n;) {
      const size_t step = static_cast<size_t>(std::min<uint64_t>(kHashReadBytes, n - done));
      CAIRN_RETURN_IF_ERROR(ReadSpool(offset + at + done, std::span<char>(buffer.get(), step)));
      piece.Update(std::string_view(buffer.get(), step));
      done += step;
    }
    AppendLe64(&pieces, piece.Digest());
  }
  return Hash64(pieces);
}

StatusOr<std::vector<uint64_t>> WriteSession::HashPrefix(uint64_t size) const {
  CAIRN_ASSIGN_OR_RETURN(uint32_t count, layout_.PartCount(size));
  // Shared with the helpers: one that starts after the caller returned finds no part left and
  // touches nothing else (the caller waits until every part it or a helper took is done).
  struct Shared {
    std::atomic<uint32_t> next{0};
    Mutex mu;
    CondVar all_done;
    uint32_t done GUARDED_BY(mu) = 0;
    Status error GUARDED_BY(mu);
    std::vector<uint64_t> hashes GUARDED_BY(mu);
  };
  auto shared = std::make_shared<Shared>();
  {
    MutexLock l(&shared->mu);
    shared->hashes.resize(count);
  }
  auto work = [this, shared, count, size] {
    for (uint32_t i = shared->next++; i < count; i = shared->next++) {
      const uint64_t begin = layout_.Offset(i);
      const uint64_t end = std::min(begin + layout_.Size(i), size);
      StatusOr<uint64_t> hash = HashSpool(begin, end - begin);
      MutexLock l(&shared->mu);
      if (hash.ok()) {
        shared->hashes[i] = *hash;
      } else if (shared->error.ok()) {
        shared->error = hash.status();
      }
      if (++shared->done == count) shared->all_done.NotifyAll();
    }
  };
  if (options_.hash_pool != nullptr) {
    for (uint32_t t = 1; t < count && t <= kPrefixHashHelpers; ++t)
      options_.hash_pool->Submit(work);
  }
  work();
  MutexLock l(&shared->mu);
  shared->all_done.Wait(&shared->mu, [&]() REQUIRES(shared->mu) { return shared->done == count; });
  CAIRN_RETURN_IF_ERROR(shared->error);
  return std::move(shared->hashes);
}

StatusOr<std::vector<uint64_t>> WriteSession::CheckReopened(uint64_t size) const {
  if (!options_.expected_digest) return std::vector<uint64_t>();
  CAIRN_ASSIGN_OR_RETURN(std::vector<uint64_t> hashes, HashPrefix(size));
  if (CombinePartHashes(hashes) != *options_.expected_digest) {
    return CorruptionError("the spool file " + spool_path_ + " of '" + key_ +
                           "' does not hold the bytes that were written (digest mismatch)");
  }
  return hashes;
}

Status WriteSession::MakeDigest() {
  uploads_done_.Wait(&mu_, [&]() REQUIRES(mu_) { return hashing_ == 0; });
  CAIRN_ASSIGN_OR_RETURN(uint32_t count, layout_.PartCount(size_));
  std::vector<uint64_t> hashes;
  hashes.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const Part& part = parts_[i];
    // Every part but the last is whole; the last is hashed as cut at the end of the file.
    if (i + 1 < count && part.HashCurrent()) {
      hashes.push_back(part.hash);
      continue;
    }
    const uint64_t begin = layout_.Offset(i);
    const uint64_t end = std::min(begin + layout_.Size(i), size_);
    CAIRN_ASSIGN_OR_RETURN(uint64_t hash, HashSpool(begin, end - begin));
    ++stats_.parts_hashed_at_seal;
    hashes.push_back(hash);
  }
  digest_ = CombinePartHashes(hashes);
  return Status::Ok();
}

Status WriteSession::CheckDigest(const std::vector<uint64_t>& part_hashes,
                                 std::vector<std::string>* ended) {
  if (CombinePartHashes(part_hashes) == *digest_) return Status::Ok();
  spool_damaged_ = true;
  Status aborted = AbortLocked(ended);
  if (!aborted.ok()) spdlog::warn("write of '{}': {}", key_, aborted.ToString());
  return CorruptionError("the spool file " + spool_path_ + " of '" + key_ +
                         "' no longer holds the bytes that were written (digest mismatch): "
                         "not uploaded");
}

std::optional<uint64_t> WriteSession::digest() const {
  MutexLock lock(&mu_);
  return digest_;
}

bool WriteSession::spool_damaged() const {
  MutexLock lock(&mu_);
  return spool_damaged_;
}

void WriteSession::Pump() {
  while (in_flight_ < options_.max_uploads_in_flight && !queued_.empty()) {
    const uint32_t index = *queued_.begin();
    queued_.erase(queued_.begin());
    Part& part = parts_[index];
    if (part.sending || part.UpToDate()) continue;
    part.sending = true;
    parts_submitted_ = true;
    ++in_flight_;
    const uint64_t generation = part.generation;
    const bool early = !closing_;
    uploads_->Submit([this, index, generation, early] { Upload(index, generation, early); });
  }
}

Status WriteSession::BeginUpload(ufs::ObjectWriter* writer, uint64_t writer_generation) {
  if (!options_.on_upload_begun) return Status::Ok();
  // One caller per writer creates and reports: no part of it goes up before it is reported.
  MutexLock begin(&begin_mu_);
  if (begun_generation_ == writer_generation) return Status::Ok();
  CAIRN_RETURN_IF_ERROR(writer->Begin());
  std::string token = writer->UploadToken();
  if (!token.empty()) {
    {
      MutexLock lock(&mu_);
      reported_token_ = token;
    }
    options_.on_upload_begun(token);
  }
  begun_generation_ = writer_generation;
  return Status::Ok();
}

void WriteSession::Upload(uint32_t index, uint64_t generation, bool early) {
  ufs::ObjectWriter* writer;
  uint64_t writer_generation;
  {
    MutexLock lock(&mu_);
    writer = writer_.get();  // Replaced only while no upload is in flight.
    writer_generation = writer_generation_;
  }
  std::vector<char> buffer(layout_.Size(index));
  Status st = ReadSpool(layout_.Offset(index), buffer);
  if (st.ok()) st = BeginUpload(writer, writer_generation);
  if (st.ok()) st = writer->WritePart(index, buffer);
  // What was sent, for Commit's check against the digest (hashed before taking the lock).
  const bool checked = options_.digest || options_.expected_digest.has_value();
  const uint64_t sent_hash = st.ok() && checked ? PartHash(buffer) : 0;
  MutexLock lock(&mu_);
  Part& part = parts_[index];
  part.sending = false;
  --in_flight_;
  if (st.ok()) {
    stats_.parts_resent += part.sent ? 1 : 0;
    part.sent = true;
    part.sent_generation = generation;
    part.sent_hash = sent_hash;
    ++stats_.parts_sent;
    stats_.parts_sent_early += early ? 1 : 0;
    stats_.bytes_sent += buffer.size();
    // Written again while it was on its way: send the new bytes too (if still whole).
    const uint64_t begin = layout_.Offset(index);
    const uint64_t end = begin + layout_.Size(index);
    if (!part.UpToDate() && !closing_ && end <= size_ && written_.Covers(begin, end)) {
      queued_.insert(index);
    }
  } else {
    ++stats_.upload_failures;
    if (first_upload_error_.ok()) first_upload_error_ = st;
    spdlog::debug("write of '{}': part {} not sent ({}); Commit sends it again", key_, index,
                  st.ToString());
  }
  Pump();
  uploads_done_.NotifyAll();
}

void WriteSession::WaitForUploads() {
  uploads_done_.Wait(
      &mu_, [&]() REQUIRES(mu_) { return in_flight_ == 0 && queued_.empty() && hashing_ == 0; });
}

Status WriteSession::ReadSpool(uint64_t offset, std::span<char> out) const {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(spool_fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "read spool file of '" + key_ + "'");
    }
    if (n == 0) break;  // Past the end of a file that shrank: zeros, as in the object.
    done += static_cast<size_t>(n);
  }
  std::fill(out.begin() + static_cast<ptrdiff_t>(done), out.end(), '\0');
  return Status::Ok();
}

void WriteSession::ReportEnded(const std::vector<std::string>& ended) const {
  if (!options_.on_upload_ended) return;
  for (const std::string& token : ended) options_.on_upload_ended(token);
}

StatusOr<ufs::ObjectInfo> WriteSession::Commit() {
  std::vector<std::string> ended;
  StatusOr<ufs::ObjectInfo> info = InternalError("not committed");
  {
    MutexLock lock(&mu_);
    info = CommitLocked(&ended);
  }
  ReportEnded(ended);
  return info;
}

StatusOr<ufs::ObjectInfo> WriteSession::CommitLocked(std::vector<std::string>* ended) {
  if (committed_) return FailedPreconditionError("write of '" + key_ + "' already committed");
  if (aborted_) return FailedPreconditionError("write of '" + key_ + "' was aborted");
  closing_ = true;
  queued_.clear();  // Early uploads stop; what is left goes below, under the same cap.
  WaitForUploads();
  CAIRN_ASSIGN_OR_RETURN(uint32_t count, layout_.PartCount(size_));
  // Parts sent past the new end cannot be left out of the upload: start it over.
  if (!parts_.empty() && parts_.lower_bound(count) != parts_.end() &&
      std::any_of(parts_.lower_bound(count), parts_.end(),
                  [](const auto& entry) { return entry.second.sent; })) {
    Status aborted = writer_->Abort();
    if (!aborted.ok()) spdlog::warn("write of '{}': {}", key_, aborted.ToString());
    if (aborted.ok() && !reported_token_.empty()) ended->push_back(reported_token_);
    reported_token_.clear();
    ufs::WriterOptions writer_options;
    writer_options.part_size = options_.part_size;
    writer_options.condition = condition_;
    CAIRN_ASSIGN_OR_RETURN(writer_, ufs_->StartWrite(key_, writer_options));
    ++writer_generation_;
    parts_submitted_ = false;
    for (auto& [index, part] : parts_) part.sent = false;
    ++stats_.writer_restarts;
  }
  if (count > 1 && size_ <= options_.whole_put_bytes && !parts_submitted_) {
    return CommitWhole(ended);
  }
  for (uint32_t i = 0; i + 1 < count; ++i) {
    if (!parts_[i].UpToDate()) queued_.insert(i);
  }
  first_upload_error_ = Status::Ok();
  Pump();
  WaitForUploads();
  for (uint32_t i = 0; i + 1 < count; ++i) {
    if (!parts_[i].UpToDate()) {
      Status st = first_upload_error_;
      if (st.ok()) st = InternalError("part " + std::to_string(i) + " was not sent");
      return st.WithContext("write of '" + key_ + "'").WithOutcomeKnown();
    }
  }
  if (options_.before_complete) options_.before_complete();
  const uint64_t tail_start = count == 0 ? 0 : layout_.Offset(count - 1);
  std::vector<char> tail(size_ - tail_start);
  CAIRN_RETURN_IF_ERROR(ReadSpool(tail_start, tail));
  if (digest_) {
    std::vector<uint64_t> hashes;
    hashes.reserve(count);
    for (uint32_t i = 0; i + 1 < count; ++i) hashes.push_back(parts_[i].sent_hash);
    if (count > 0) hashes.push_back(PartHash(tail));
    CAIRN_RETURN_IF_ERROR(CheckDigest(hashes, ended));
  }
  CAIRN_ASSIGN_OR_RETURN(ufs::ObjectInfo info, writer_->Commit(size_, tail));
  committed_ = true;
  if (!reported_token_.empty()) ended->push_back(std::exchange(reported_token_, ""));
  return info;
}

StatusOr<ufs::ObjectInfo> WriteSession::CommitWhole(std::vector<std::string>* ended) {
  std::vector<char> file(size_);
  CAIRN_RETURN_IF_ERROR(ReadSpool(0, file));
  if (digest_) {
    CAIRN_ASSIGN_OR_RETURN(uint32_t count, layout_.PartCount(size_));
    std::vector<uint64_t> hashes;
    hashes.reserve(count);
    const std::span<const char> bytes(file);
    for (uint32_t i = 0; i < count; ++i) {
      const uint64_t begin = layout_.Offset(i);
      const uint64_t end = std::min(begin + layout_.Size(i), size_);
      hashes.push_back(PartHash(bytes.subspan(begin, end - begin)));
    }
    CAIRN_RETURN_IF_ERROR(CheckDigest(hashes, ended));
  }
  // A writer whose one part holds the file. The session's own writer put nothing in the store
  // (no part went to it), so dropping it costs no request.
  ufs::WriterOptions writer_options;
  writer_options.part_size =
      std::clamp<uint64_t>(size_, options_.part_size, ufs::PartLayout::kMaxBase);
  writer_options.condition = condition_;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<ufs::ObjectWriter> whole,
                         ufs_->StartWrite(key_, writer_options));
  if (options_.before_complete) options_.before_complete();
  CAIRN_ASSIGN_OR_RETURN(ufs::ObjectInfo info, whole->Commit(size_, file));
  writer_ = std::move(whole);
  ++writer_generation_;
  committed_ = true;
  ++stats_.whole_puts;
  return info;
}

Status WriteSession::Abort() {
  std::vector<std::string> ended;
  Status st;
  {
    MutexLock lock(&mu_);
    st = AbortLocked(&ended);
  }
  ReportEnded(ended);
  return st;
}

Status WriteSession::AbortLocked(std::vector<std::string>* ended) {
  if (committed_) return FailedPreconditionError("write of '" + key_ + "' already committed");
  closing_ = true;
  queued_.clear();
  WaitForUploads();
  if (aborted_) return Status::Ok();
  CAIRN_RETURN_IF_ERROR(writer_->Abort());
  aborted_ = true;
  if (!reported_token_.empty()) ended->push_back(std::exchange(reported_token_, ""));
  return Status::Ok();
}

void WriteSession::SetCondition(ufs::WriteCondition condition) {
  MutexLock lock(&mu_);
  condition_ = condition;
  writer_->SetCondition(std::move(condition));
}

ufs::WriteCondition WriteSession::condition() const {
  MutexLock lock(&mu_);
  return condition_;
}

WriteSessionStats WriteSession::stats() const {
  MutexLock lock(&mu_);
  WriteSessionStats stats = stats_;
  stats.write_behinds = write_behinds_.load();
  return stats;
}

}  // namespace cairn::write
