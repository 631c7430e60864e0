#include "protocol/page_channel.h"

#include <future>
#include <utility>

namespace cairn::protocol {

StatusOr<WriteReply> CallWriteAndWait(PageChannel& channel, const WriteRequest& request) {
  std::promise<StatusOr<WriteReply>> promise;
  std::future<StatusOr<WriteReply>> answer = promise.get_future();
  channel.CallWrite(
      request, [&promise](StatusOr<WriteReply> reply) { promise.set_value(std::move(reply)); });
  return answer.get();
}

}  // namespace cairn::protocol
