#include "client/page_fetcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <random>

#include "common/checksum.h"
#include "pagestore/page_store.h"

namespace cairn::client {

using protocol::ByteRange;
using protocol::ReadPageRequest;

namespace {

// The page a request about `object` names.
protocol::PageRef PageOf(const ObjectRef& object, uint64_t page_index, uint32_t page_size) {
  protocol::PageRef page;
  page.mount = object.mount->spec.path;
  page.key = object.key;
  page.version = object.info.version;
  page.object_size = object.info.size;
  page.page_index = page_index;
  page.page_size = page_size;
  return page;
}

}  // namespace

bool VerifyChunks(std::span<const char> data, const std::vector<uint64_t>& checksums) {
  if (checksums.size() != ChunkCount(data.size())) return false;
  for (size_t i = 0; i < checksums.size(); ++i) {
    size_t off = i * kChecksumChunkSize;
    size_t n = std::min<size_t>(kChecksumChunkSize, data.size() - off);
    if (Checksum64(data.subspan(off, n)) != checksums[i]) return false;
  }
  return true;
}

namespace {

uint64_t RandomSalt() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// A 64-bit mix (splitmix64's finaliser): spreads (hash ^ salt) over all bits before the modulo.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

PageFetcher::PageFetcher(uint32_t page_size, ChannelFactory factory, int max_worker_attempts)
    : page_size_(page_size),
      factory_(std::move(factory)),
      max_worker_attempts_(std::max(1, max_worker_attempts)),
      spread_salt_(RandomSalt()),
      placement_(std::make_shared<Placement>()) {}

Status PageFetcher::SetWorkers(std::vector<placement::WorkerNode> nodes) {
  CAIRN_ASSIGN_OR_RETURN(placement::Ring ring, placement::Ring::Create(std::move(nodes)));
  std::shared_ptr<const Placement> old = Current();
  auto next = std::make_shared<Placement>();
  bool changed = old->ring.size() != ring.size();
  for (const placement::WorkerNode& node : ring.nodes()) {
    const placement::WorkerNode* before = nullptr;
    for (const placement::WorkerNode& o : old->ring.nodes()) {
      if (o.id == node.id) before = &o;
    }
    auto it = old->channels.find(node.id);
    if (before != nullptr && before->address == node.address && it != old->channels.end()) {
      next->channels[node.id] = it->second;
      changed |= before->weight != node.weight;
    } else {
      next->channels[node.id] = std::shared_ptr<protocol::PageChannel>(factory_(node));
      changed = true;
    }
  }
  next->ring = std::move(ring);
  if (changed) counters_.ring_updates.fetch_add(1, std::memory_order_relaxed);
  MutexLock l(&mu_);
  placement_ = std::move(next);
  return Status::Ok();
}

std::vector<placement::WorkerNode> PageFetcher::workers() const { return Current()->ring.nodes(); }

std::shared_ptr<const PageFetcher::Placement> PageFetcher::Current() const {
  MutexLock l(&mu_);
  return placement_;
}

PageFetcher::Plan PageFetcher::PlanFor(const Placement& placement, const ObjectRef& object,
                                       uint64_t page_index) const {
  Plan plan;
  if (placement.ring.empty()) return plan;
  uint64_t h = placement::PageKeyHash(object.object_id, object.info.version, page_index);
  size_t replicas = std::clamp<size_t>(object.mount->spec.replicas, 1, placement.ring.size());
  size_t attempts = std::max<size_t>(replicas + 1, max_worker_attempts_);
  std::vector<const placement::WorkerNode*> nodes = placement.ring.Candidates(h, attempts);
  // Spread reads over the replicas: this client starts with one of them, chosen per page.
  size_t preferred = replicas > 1 ? Mix(h ^ spread_salt_) % replicas : 0;
  std::rotate(nodes.begin(), nodes.begin() + preferred, nodes.begin() + replicas);
  for (const placement::WorkerNode* node : nodes) {
    auto it = placement.channels.find(node->id);
    if (it != placement.channels.end()) plan.channels.push_back(it->second);
  }
  return plan;
}

StatusOr<protocol::MetadataReply> PageFetcher::Metadata(const protocol::MetadataRequest& request) {
  std::shared_ptr<const Placement> placement = Current();
  if (placement->ring.empty()) {
    return UnavailableError("no worker to ask for metadata (none known yet)");
  }
  const std::string& path = protocol::PathOf(request);
  std::vector<const placement::WorkerNode*> nodes =
      placement->ring.Candidates(Hash64(path), static_cast<size_t>(max_worker_attempts_));
  Status last = UnavailableError("no worker answered");
  for (const placement::WorkerNode* node : nodes) {
    auto it = placement->channels.find(node->id);
    if (it == placement->channels.end()) continue;
    std::promise<StatusOr<protocol::MetadataReply>> promise;
    auto future = promise.get_future();
    it->second->CallMetadata(request, [&promise](StatusOr<protocol::MetadataReply> reply) {
      promise.set_value(std::move(reply));
    });
    StatusOr<protocol::MetadataReply> reply = future.get();
    const StatusCode code = reply.status().code();
    if (code != StatusCode::kUnavailable && code != StatusCode::kDeadlineExceeded) return reply;
    spdlog::debug("worker {} could not answer for {}: {}", it->second->Describe(), path,
                  reply.status().ToString());
    last = reply.status();
  }
  return UnavailableError("no worker could answer for " + path + ": " + last.message());
}

std::vector<std::shared_ptr<protocol::PageChannel>> PageFetcher::OwnersOf(
    const std::string& path) const {
  std::shared_ptr<const Placement> placement = Current();
  std::vector<std::shared_ptr<protocol::PageChannel>> owners;
  for (const placement::WorkerNode* node :
       placement->ring.Candidates(Hash64(path), static_cast<size_t>(max_worker_attempts_))) {
    auto it = placement->channels.find(node->id);
    if (it != placement->channels.end()) owners.push_back(it->second);
  }
  return owners;
}

std::vector<std::pair<std::string, std::shared_ptr<protocol::PageChannel>>>
PageFetcher::AllWorkers() const {
  std::shared_ptr<const Placement> placement = Current();
  std::vector<std::pair<std::string, std::shared_ptr<protocol::PageChannel>>> all(
      placement->channels.begin(), placement->channels.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return all;
}

StatusOr<protocol::PageSource> PageFetcher::TryChannel(protocol::PageChannel* channel,
                                                       const ReadPageRequest& request,
                                                       ByteRange range, std::span<char> dest) {
  std::promise<StatusOr<protocol::PageReply>> promise;
  auto future = promise.get_future();
  channel->Call(request, dest, [&promise](StatusOr<protocol::PageReply> reply) {
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
  return reply->source;
}

Status PageFetcher::ReadRange(const ObjectRef& object, uint64_t page_index, uint32_t offset,
                              std::span<char> out) {
  uint32_t page_length = protocol::PageLength(object.info.size, page_index, page_size_);
  if (out.empty()) return Status::Ok();
  if (offset + out.size() > page_length) return InternalError("range outside the page");

  ReadPageRequest request;
  request.page = PageOf(object, page_index, page_size_);
  request.offset = offset;
  request.length = static_cast<uint32_t>(out.size());
  request.no_cache = no_cache_;
  ByteRange range = protocol::AlignedRange(offset, request.length, page_length);
  // Read straight into the caller's buffer when the range is chunk-aligned already.
  bool direct = range.begin == offset && range.size() == out.size();
  std::string scratch;
  std::span<char> dest = out;
  if (!direct) {
    scratch.resize(range.size());
    dest = scratch;
  }

  if (protocol::IsPendingVersion(object.info.version)) {
    return ReadPending(object, request, range, dest, direct ? std::span<char>() : out);
  }
  std::shared_ptr<const Placement> placement = Current();
  Plan plan = PlanFor(*placement, object, page_index);
  for (size_t i = 0; i < plan.channels.size(); ++i) {
    protocol::PageChannel* channel = plan.channels[i].get();
    if (auto dirs = channel->ShortCircuitDirs()) {
      if (TryShortCircuit(*dirs, object, page_index, range, dest)) {
        counters_.short_circuit_reads.fetch_add(1, std::memory_order_relaxed);
        if (!direct) std::memcpy(out.data(), scratch.data() + (offset - range.begin), out.size());
        return Status::Ok();
      }
    }
    counters_.page_reads.fetch_add(1, std::memory_order_relaxed);
    request.refetch = false;
    StatusOr<protocol::PageSource> source = TryChannel(channel, request, range, dest);
    if (source.status().code() == StatusCode::kCorruption) {
      counters_.checksum_failures.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("{}; asking the worker to refetch page {} of {}", source.status().message(),
                   page_index, object.object_id);
      request.refetch = true;
      source = TryChannel(channel, request, range, dest);
    }
    if (source.ok()) {
      if (!direct) std::memcpy(out.data(), scratch.data() + (offset - range.begin), out.size());
      return Status::Ok();
    }
    Status s = source.status();
    // The object itself changed or vanished: no other worker or the source can do better.
    // PermissionDenied: the cluster's policy (or the worker's view of this client's token)
    // refuses the read, and every worker applies the same policy; reading around it from the
    // source would defeat it.
    if (s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kNotFound ||
        s.code() == StatusCode::kPermissionDenied) {
      return s;
    }
    counters_.page_read_failures.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("worker {} failed page {} of {}: {}", channel->Describe(), page_index,
                  object.object_id, s.ToString());
  }
  return ReadFromSource(object, page_index, offset, out);
}

Status PageFetcher::ReadPending(const ObjectRef& object, const ReadPageRequest& request,
                                ByteRange range, std::span<char> dest, std::span<char> out) {
  const std::string path =
      (object.mount->spec.path == "/" ? "" : object.mount->spec.path) + "/" + object.key;
  Status last = UnavailableError("no worker to read " + path + " from (it is not uploaded yet)");
  for (const std::shared_ptr<protocol::PageChannel>& channel : OwnersOf(path)) {
    counters_.page_reads.fetch_add(1, std::memory_order_relaxed);
    StatusOr<protocol::PageSource> source = TryChannel(channel.get(), request, range, dest);
    if (source.ok()) {
      if (!out.empty()) {
        std::memcpy(out.data(), dest.data() + (request.offset - range.begin), out.size());
      }
      return Status::Ok();
    }
    last = source.status();
    // The owner's answer about the file (changed, gone, refused) is final; a worker that could
    // not answer (down, stalled) may have handed the path to the next one.
    const StatusCode code = last.code();
    if (code != StatusCode::kUnavailable && code != StatusCode::kDeadlineExceeded &&
        code != StatusCode::kCorruption) {
      return last;
    }
    counters_.page_read_failures.fetch_add(1, std::memory_order_relaxed);
  }
  return last;
}

void PageFetcher::Control(const ObjectRef& object, uint64_t page_index, ControlOp op, int copies,
                          std::function<void(const ControlResult&)> done) {
  std::shared_ptr<const Placement> placement = Current();
  std::vector<std::shared_ptr<protocol::PageChannel>> targets;
  std::vector<std::string> ids;
  if (!placement->ring.empty()) {
    uint64_t h = placement::PageKeyHash(object.object_id, object.info.version, page_index);
    size_t n =
        copies <= 0 ? placement->ring.size() : std::min<size_t>(copies, placement->ring.size());
    for (const placement::WorkerNode* node : placement->ring.Candidates(h, n)) {
      auto it = placement->channels.find(node->id);
      if (it != placement->channels.end()) {
        targets.push_back(it->second);
        ids.push_back(node->id);
      }
    }
  }
  if (targets.empty()) {
    done(ControlResult{});
    return;
  }
  protocol::RequestBase base;
  base.page = PageOf(object, page_index, page_size_);
  protocol::Request request;
  switch (op) {
    case ControlOp::kLoad: {
      // A load waits for a source read and a disk write behind other loads: give it time,
      // rather than have the channel declare the worker stalled.
      base.deadline_ms = 120'000;
      request = protocol::LoadPageRequest{base};
      break;
    }
    case ControlOp::kProbe:
      request = protocol::ProbePageRequest{base};
      break;
    case ControlOp::kDrop:
      request = protocol::DropPageRequest{base};
      break;
  }
  // Shared by the callbacks; the last one to answer reports.
  struct Pending {
    Mutex mu;
    ControlResult result GUARDED_BY(mu);
    int left GUARDED_BY(mu) = 0;
    std::function<void(const ControlResult&)> done;
  };
  auto pending = std::make_shared<Pending>();
  pending->done = std::move(done);
  {
    MutexLock l(&pending->mu);
    pending->left = static_cast<int>(targets.size());
    pending->result.sent = pending->left;
  }
  // Records one worker's answer; the last answer reports.
  auto answer = [pending](const StatusOr<protocol::PageReply>& reply) {
    ControlResult final;
    {
      MutexLock l(&pending->mu);
      if (!reply.ok()) {
        ++pending->result.failed;
        if (pending->result.first_error.ok()) pending->result.first_error = reply.status();
      } else if (reply->source == protocol::PageSource::kCache) {
        ++pending->result.was_cached;
      } else if (reply->source == protocol::PageSource::kPeer) {
        ++pending->result.from_peer;
      }
      if (--pending->left > 0) return;
      final = pending->result;
    }
    pending->done(final);
  };
  if (op != ControlOp::kLoad || targets.size() == 1) {
    for (const auto& channel : targets) {
      channel->Call(request, {}, [answer](StatusOr<protocol::PageReply> reply) { answer(reply); });
    }
    return;
  }
  // A load of several replicas: the first reads the source, the others then copy the page from
  // it (protocol PEER), so a replicated preload costs one source read per page, not one per
  // replica. If the first fails, the others read the source themselves.
  auto rest = std::make_shared<std::vector<std::shared_ptr<protocol::PageChannel>>>(
      targets.begin() + 1, targets.end());
  targets.front()->Call(
      request, {}, [answer, rest, base, peer = ids.front()](StatusOr<protocol::PageReply> reply) {
        protocol::Request next = protocol::LoadPageRequest{base};
        if (reply.ok()) next = protocol::CopyFromPeerRequest{base, peer};
        answer(reply);
        for (const auto& channel : *rest) {
          channel->Call(next, {}, [answer](StatusOr<protocol::PageReply> r) { answer(r); });
        }
      });
}

bool PageFetcher::TryShortCircuit(const std::vector<std::string>& dirs, const ObjectRef& object,
                                  uint64_t page_index, ByteRange range, std::span<char> dest) {
  auto reader =
      pagestore::OpenPageReadOnly(dirs, {object.object_id, object.info.version, page_index});
  if (!reader.ok()) return false;  // Not cached (or damaged): the worker handles it.
  uint32_t page_length = protocol::PageLength(object.info.size, page_index, page_size_);
  // This client keeps what it reads in its page buffer: a large read goes around the page cache.
  if ((*reader)->data_length() != page_length || !(*reader)->ReadDirectAt(range.begin, dest).ok()) {
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

Status PageFetcher::ReadFromSource(const ObjectRef& object, uint64_t page_index, uint32_t offset,
                                   std::span<char> out) {
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
