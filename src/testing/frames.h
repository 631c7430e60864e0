// Frames by hand, for tests that play one end of the worker protocol (a misbehaving client, a
// fake worker) over a real stream.
// Thread-safety: as the stream's (one reader and one writer at a time).
#ifndef CAIRN_TESTING_FRAMES_H_
#define CAIRN_TESTING_FRAMES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "net/stream.h"
#include "protocol/wire.h"

namespace cairn::testing {

// Writes one frame (header and payload).
Status SendFrame(net::Stream* stream, protocol::MessageType type, uint64_t id,
                 const std::string& payload);

// Reads one frame: its header and payload.
StatusOr<std::pair<protocol::FrameHeader, std::string>> ReadFrame(net::Stream* stream);

// Sends `request` as one frame of its type.
Status SendRequest(net::Stream* stream, uint64_t id, const protocol::Request& request);

// A WritePage of `data` (not copied: it must outlive the request) at `offset` of `handle`,
// with its checksums.
protocol::WritePageRequest WritePageOf(uint64_t handle, uint64_t offset, std::string_view data);

}  // namespace cairn::testing

#endif  // CAIRN_TESTING_FRAMES_H_
