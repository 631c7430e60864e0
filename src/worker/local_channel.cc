#include "worker/local_channel.h"

namespace cairn::worker {

LocalChannel::LocalChannel(PageService* service, WriteService* writes, int write_threads)
    : service_(service), writes_(writes) {
  if (writes_ != nullptr && write_threads > 0) {
    write_pool_ = std::make_unique<ThreadPool>(write_threads, "local-write");
  }
}

LocalChannel::~LocalChannel() { write_pool_.reset(); }

void LocalChannel::Call(const protocol::Request& request, std::span<char> dest, Callback done) {
  auto served = service_->Serve(request);
  if (!served.ok()) {
    done(served.status());
    return;
  }
  protocol::PageReply reply;
  if (served->control) {
    reply.source = *served->control;
    done(std::move(reply));
    return;
  }
  PageResult& result = served->data;
  reply.source = result.source;
  if (result.range.size() == 0) {  // A lookup or peer read that missed: no data.
    done(std::move(reply));
    return;
  }
  if (dest.size() != result.range.size()) {
    done(InternalError("destination does not match the aligned page range"));
    return;
  }
  // The in-process client keeps what it reads (its page buffer, then the kernel's cache of the
  // FUSE file): a large read of a cached page goes around this machine's page cache, which would
  // otherwise copy the bytes once more and hold a second copy of them.
  Status s = result.CopyToBypassingPageCache(dest);
  if (!s.ok()) {
    if (result.reader) service_->DropCachedPage(protocol::BaseOf(request).page, *result.reader);
    done(s);
    return;
  }
  reply.data_offset = result.range.begin;
  reply.data_length = result.range.size();
  reply.checksums = std::move(result.checksums);
  done(std::move(reply));
}

void LocalChannel::CallWrite(const protocol::WriteRequest& request, WriteCallback done) {
  if (writes_ == nullptr) {
    done(FailedPreconditionError("the in-process worker takes no writes"));
    return;
  }
  if (write_pool_ != nullptr && std::holds_alternative<protocol::WritePageRequest>(request) &&
      write_pool_->QueueLength() < kMaxQueuedWrites) {
    // The request's data belongs to the caller until `done` runs; the request itself (handle,
    // offset, checksums, a span) is copied.
    write_pool_->Submit(
        [this, request, done = std::move(done)]() { done(writes_->Serve("", request)); });
    return;
  }
  done(writes_->Serve("", request));
}

void LocalChannel::CallMetadata(const protocol::MetadataRequest& request, MetadataCallback done) {
  done(metadata_.Serve(request, auth::Visibility{true, {}}));
}

}  // namespace cairn::worker
