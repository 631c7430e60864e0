// WriteAllIovecs: the resume loop of a gathered write. writev(2) and sendmsg(2) may write fewer
// bytes than asked (a full socket buffer, a signal) and take at most IOV_MAX buffers a call;
// this advances past what each call wrote and calls again until every byte is out. Shared by
// the page store's file writes and the network's socket sends.
//
// Thread-safety: works on the caller's vector only.
#ifndef CAIRN_COMMON_IOVEC_WRITER_H_
#define CAIRN_COMMON_IOVEC_WRITER_H_

#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <vector>

namespace cairn {

// Calls `write_some(const iovec* first, int count)` (it returns the bytes written, or -1 with
// errno set, as writev does) with at most IOV_MAX buffers at a time until every byte of `iov`
// is written, retrying EINTR. `iov` is consumed: its buffers are advanced past what went out.
// Returns 0, or the errno of the call that failed (EIO for a call that wrote nothing while
// bytes were left, which would otherwise repeat forever).
template <typename WriteSome>
int WriteAllIovecs(std::vector<iovec>& iov, WriteSome&& write_some) {
  size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t n = write_some(iov.data() + first, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    size_t left = static_cast<size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    } else if (n == 0 && first < iov.size()) {
      return EIO;
    }
  }
  return 0;
}

}  // namespace cairn

#endif  // CAIRN_COMMON_IOVEC_WRITER_H_
