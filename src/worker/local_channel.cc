#include "worker/local_channel.h"

namespace cairn::worker {

void LocalChannel::ReadPage(const protocol::ReadPageRequest& request, std::span<char> dest,
                            Callback done) {
  if (request.flags & protocol::kControlFlags) {
    auto source = service_->ControlPage(request);
    if (!source.ok()) {
      done(source.status());
      return;
    }
    protocol::PageReply reply;
    reply.source = *source;
    done(std::move(reply));
    return;
  }
  auto result = service_->ReadPage(request);
  if (!result.ok()) {
    done(result.status());
    return;
  }
  if (result->range.size() == 0) {  // A cache-only read that missed: no data.
    protocol::PageReply reply;
    reply.source = result->source;
    done(std::move(reply));
    return;
  }
  if (dest.size() != result->range.size()) {
    done(InternalError("destination does not match the aligned page range"));
    return;
  }
  Status s = result->CopyTo(dest);
  if (!s.ok()) {
    if (result->reader) service_->DropCachedPage(request);
    done(s);
    return;
  }
  protocol::PageReply reply;
  reply.source = result->source;
  reply.data_offset = result->range.begin;
  reply.data_length = result->range.size();
  reply.checksums = std::move(result->checksums);
  done(std::move(reply));
}

}  // namespace cairn::worker
