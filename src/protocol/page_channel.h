// PageChannel: how a client asks one worker for page bytes. Two implementations: the TCP
// channel (transport/remote_channel.h) and the in-process channel of an embedded worker
// (worker/local_channel.h), so `cairn up` skips the network hop entirely.
//
// Thread-safety: implementations are safe for concurrent use.
#ifndef CAIRN_PROTOCOL_PAGE_CHANNEL_H_
#define CAIRN_PROTOCOL_PAGE_CHANNEL_H_

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "protocol/wire.h"

namespace cairn::protocol {

// The answer to a request. Data requests (ReadPage, LookupPage, PeerRead): where the returned
// bytes sit in the page and their checksums; the bytes were written to the caller's buffer.
// data_length 0 means no data (a lookup or peer read of a page not cached there). Control
// requests: `source` only (was it cached; kPeer: copied from the peer).
struct PageReply {
  PageSource source = PageSource::kCache;
  uint32_t data_offset = 0;
  uint32_t data_length = 0;
  std::vector<uint64_t> checksums;
};

class PageChannel {
 public:
  using Callback = std::function<void(StatusOr<PageReply>)>;
  virtual ~PageChannel() = default;

  // Sends one request. For a data request `dest` must be exactly the size of the range the
  // reply carries (AlignedRange(offset, length, page length) for ReadPage and LookupPage, the
  // whole page for PeerRead) and stay alive until `done` runs; for control requests it is
  // empty. `done` runs exactly once, possibly on another thread, possibly before this returns.
  // Errors: Unavailable/DeadlineExceeded (worker unreachable or too slow: try elsewhere; marked
  // Status::outcome_unknown() when the request may have reached the worker: its connection
  // broke after the request was sent, or its deadline passed),
  // FailedPrecondition (the object changed: the version is gone; or an incompatible protocol
  // version), NotFound (object deleted), others as reported by the worker. The caller verifies
  // the checksums.
  virtual void Call(const Request& request, std::span<char> dest, Callback done) = 0;

  // Sends a metadata request (StatPath, ListDir; protocol v4). `done` runs exactly once, maybe
  // on another thread, maybe before this returns, with the worker's answer (a reply whose
  // status is not OK arrives as that Status) or the errors of Call. The default answers
  // Unimplemented: a channel to an in-process worker has no use for it (the embedded worker
  // and its client share their sources).
  using MetadataCallback = std::function<void(StatusOr<MetadataReply>)>;
  virtual void CallMetadata(const MetadataRequest& /*request*/, MetadataCallback done) {
    done(UnimplementedError(Describe() + " does not answer metadata requests"));
  }

  // Sends a write request (protocol v5; docs/write-path.md). A WritePage's data must stay alive
  // until `done` runs. `done` runs exactly once, maybe on another thread, maybe before this
  // returns, with the worker's answer (a reply whose status is not OK arrives as that Status)
  // or the errors of Call. The default refuses: not every channel takes writes.
  using WriteCallback = std::function<void(StatusOr<WriteReply>)>;
  virtual void CallWrite(const WriteRequest& /*request*/, WriteCallback done) {
    done(FailedPreconditionError(Describe() + " takes no writes"));
  }

  // A short description for logs ("127.0.0.1:7070", "in-process").
  virtual std::string Describe() const = 0;

  // The worker's cache folders when this client may read its page files directly (the worker
  // runs on this machine and shares its file system: a short-circuit read), else null.
  // May connect to the worker to find out. Thread-safe.
  virtual std::shared_ptr<const std::vector<std::string>> ShortCircuitDirs() { return nullptr; }
};

// Sends `request` on `channel` (CallWrite) and waits for its answer: for a caller that may
// block, never on a channel's callback thread (the answer would wait on itself).
StatusOr<WriteReply> CallWriteAndWait(PageChannel& channel, const WriteRequest& request);

}  // namespace cairn::protocol

#endif  // CAIRN_PROTOCOL_PAGE_CHANNEL_H_
