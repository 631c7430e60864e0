#include "client/page_fetcher.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <future>

#include "common/checksum.h"
#include "pagestore/page_store.h"

namespace cairn::client {

using protocol::ByteRange;
using protocol::ReadPageRequest;

bool VerifyChunks(std::span<const char> data, const std::vector<uint64_t>& checksums) {
  if (checksums.size() != ChunkCount(data.size())) return false;
  for (size_t i = 0; i < checksums.size(); ++i) {
    size_t off = i * kChecksumChunkSize;
    size_t n = std::min<size_t>(kChecksumChunkSize, data.size() - off);
    if (Checksum64(data.subspan(off, n)) != checksums[i]) return false;
  }
  return true;
}

PageFetcher::PageFetcher(
    uint32_t page_size, placement::Ring ring,
    std::unordered_map<std::string, std::unique_ptr<protocol::PageChannel>> channels,
    int max_worker_attempts)
    : page_size_(page_size),
      ring_(std::move(ring)),
      channels_(std::move(channels)),
      max_worker_attempts_(std::max(1, max_worker_attempts)) {}

std::vector<protocol::PageChannel*> PageFetcher::ChannelsFor(const ObjectRef& object,
                                                             uint64_t page_index) {
  std::vector<protocol::PageChannel*> out;
  if (ring_.empty()) return out;
  uint64_t h = placement::PageKeyHash(object.object_id, object.info.version, page_index);
  for (const placement::WorkerNode* node : ring_.Candidates(h, max_worker_attempts_)) {
    auto it = channels_.find(node->id);
    if (it != channels_.end()) out.push_back(it->second.get());
  }
  return out;
}

Status PageFetcher::TryChannel(protocol::PageChannel* channel, const ReadPageRequest& request,
                               ByteRange range, std::span<char> dest) {
  std::promise<StatusOr<protocol::PageReply>> promise;
  auto future = promise.get_future();
  channel->ReadPage(request, dest, [&promise](StatusOr<protocol::PageReply> reply) {
    promise.set_value(std::move(reply));
  });
  StatusOr<protocol::PageReply> reply = future.get();
  if (!reply.ok()) return reply.status();
  if (reply->data_offset != range.begin || reply->data_length != range.size()) {
    return CorruptionError("worker returned another range than asked");
  }
  if (!VerifyChunks(dest, reply->checksums)) {
    return CorruptionError("page checksum mismatch from " + channel->Describe());
  }
  return Status::Ok();
}

Status PageFetcher::ReadRange(const ObjectRef& object, uint64_t page_index, uint32_t offset,
                              std::span<char> out) {
  uint32_t page_length = protocol::PageLength(object.info.size, page_index, page_size_);
  if (out.empty()) return Status::Ok();
  if (offset + out.size() > page_length) return InternalError("range outside the page");

  ReadPageRequest request;
  request.page_size = page_size_;
  request.offset = offset;
  request.length = static_cast<uint32_t>(out.size());
  request.page_index = page_index;
  request.object_size = object.info.size;
  request.mount = object.mount->spec.path;
  request.key = object.key;
  request.version = object.info.version;
  ByteRange range = protocol::AlignedRange(offset, request.length, page_length);
  // Read straight into the caller's buffer when the range is chunk-aligned already.
  bool direct = range.begin == offset && range.size() == out.size();
  std::string scratch;
  std::span<char> dest = out;
  if (!direct) {
    scratch.resize(range.size());
    dest = scratch;
  }

  for (protocol::PageChannel* channel : ChannelsFor(object, page_index)) {
    if (auto dirs = channel->ShortCircuitDirs()) {
      if (TryShortCircuit(*dirs, object, page_index, range, dest)) {
        counters_.short_circuit_reads.fetch_add(1, std::memory_order_relaxed);
        if (!direct) std::memcpy(out.data(), scratch.data() + (offset - range.begin), out.size());
        return Status::Ok();
      }
    }
    counters_.page_reads.fetch_add(1, std::memory_order_relaxed);
    request.flags = 0;
    Status s = TryChannel(channel, request, range, dest);
    if (s.code() == StatusCode::kCorruption) {
      counters_.checksum_failures.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("{}; asking the worker to refetch page {} of {}", s.message(), page_index,
                   object.object_id);
      request.flags = protocol::kFlagRefetch;
      s = TryChannel(channel, request, range, dest);
    }
    if (s.ok()) {
      if (!direct) std::memcpy(out.data(), scratch.data() + (offset - range.begin), out.size());
      return Status::Ok();
    }
    // The object itself changed or vanished: no other worker or the source can do better.
    if (s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kNotFound) {
      return s;
    }
    counters_.page_read_failures.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("worker {} failed page {} of {}: {}", channel->Describe(), page_index,
                  object.object_id, s.ToString());
  }
  return ReadFromSource(object, page_index, offset, out);
}

bool PageFetcher::TryShortCircuit(const std::vector<std::string>& dirs, const ObjectRef& object,
                                  uint64_t page_index, ByteRange range, std::span<char> dest) {
  auto reader = pagestore::OpenPageReadOnly(
      dirs, {object.object_id, object.info.version, page_index});
  if (!reader.ok()) return false;  // Not cached (or damaged): the worker handles it.
  uint32_t page_length = protocol::PageLength(object.info.size, page_index, page_size_);
  if ((*reader)->data_length() != page_length || !(*reader)->ReadAt(range.begin, dest).ok()) {
    return false;
  }
  const std::vector<uint64_t>& all = (*reader)->chunk_checksums();
  size_t first = range.begin / kChecksumChunkSize;
  size_t count = ChunkCount(range.size());
  if (first + count > all.size()) return false;
  std::vector<uint64_t> sums(all.begin() + first, all.begin() + first + count);
  if (!VerifyChunks(dest, sums)) {
    counters_.checksum_failures.fetch_add(1, std::memory_order_relaxed);
    return false;  // The worker's read will fail the same check and refetch the page.
  }
  return true;
}

Status PageFetcher::ReadFromSource(const ObjectRef& object, uint64_t page_index,
                                   uint32_t offset, std::span<char> out) {
  uint64_t pos = page_index * page_size_ + offset;
  auto n = object.mount->ufs->Read(object.key, object.info.version, pos, out);
  if (!n.ok()) return n.status();
  if (*n != out.size()) {
    return FailedPreconditionError("object " + object.key + " is shorter than its size at open");
  }
  counters_.fallback_bytes.fetch_add(out.size(), std::memory_order_relaxed);
  return Status::Ok();
}

}  // namespace cairn::client
