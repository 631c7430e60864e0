#include "client/room_wait.h"

#include <algorithm>

namespace cairn::client {

std::optional<int64_t> RoomWait::Refused(int64_t now_us) {
  if (refusals_ == 0) first_refusal_us_ = now_us;
  if (now_us - first_refusal_us_ >= int64_t{limit_.count()} * 1000) return std::nullopt;
  const int64_t backoff_us =
      std::min<int64_t>(1'000'000, int64_t{20'000} << std::min(refusals_, 6));
  ++refusals_;
  due_us_ = now_us + backoff_us;
  return due_us_;
}

void RoomWait::Resending(int64_t now_us) {
  const int64_t gap = std::min<int64_t>(kIdleGapUs, int64_t{limit_.count()} * 1000);
  if (refusals_ > 0 && now_us - due_us_ > gap) refusals_ = 0;  // A new wait.
}

std::string RoomWait::GaveUp() const { return "no room came in " + Describe(limit_); }

std::string RoomWait::Describe(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + " s"
                               : std::to_string(d.count()) + " ms";
}

}  // namespace cairn::client
