// RoomWait: the schedule of a request its worker refused for room (ResourceExhausted: the
// write-back budget is full of files still uploading, or the spool disk is). Uploads make room
// without the client doing anything, so the request is sent again with backoff (20 ms,
// doubling, at most 1 s apart) until `limit` has passed since the first refusal; then the
// refusal stands (ENOSPC through FUSE). A resend later than its time by more than
// min(kIdleGapUs, limit) starts the wait again: a file's write is resent by the writer's next
// call that waits, so such a gap is time no call waited (an idle writer's minutes), while a
// waiting call resends on time, or after a resend's timeout and backoff (5 s and 2 s at most)
// at worst. Used by a
// file's writes and growing truncates (RemoteFileWriter) and by an open that keeps the content
// (ClientImpl::OpenOnOwner).
//
// Pure: the caller passes the time (from its injected clock).
// Thread-safety: none (one per request, used by one thread at a time).
#ifndef CAIRN_CLIENT_ROOM_WAIT_H_
#define CAIRN_CLIENT_ROOM_WAIT_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace cairn::client {

class RoomWait {
 public:
  explicit RoomWait(std::chrono::milliseconds limit) : limit_(limit) {}

  // A refusal at `now_us`: when to send the request again, or nullopt when `limit` has passed
  // since the first refusal (give up).
  std::optional<int64_t> Refused(int64_t now_us);
  static constexpr int64_t kIdleGapUs = 10'000'000;
  // The request is sent again at `now_us`.
  void Resending(int64_t now_us);
  // Whether the request was refused before (the caller logs the first wait only).
  bool waited() const { return refusals_ > 0; }
  // The context a final refusal gets: "no room came in 60 s".
  std::string GaveUp() const;
  // "300 ms", "60 s".
  static std::string Describe(std::chrono::milliseconds d);

 private:
  std::chrono::milliseconds limit_;
  int64_t first_refusal_us_ = 0;
  int64_t due_us_ = 0;  // What Refused answered last.
  int refusals_ = 0;
};

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_ROOM_WAIT_H_
