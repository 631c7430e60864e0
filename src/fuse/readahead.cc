#include "fuse/readahead.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <vector>

namespace cairn::fuse {
namespace {

// Undoes the kernel's octal escapes in a mountinfo path ("\040" for a space).
std::string Unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '3' &&
        text[i + 2] >= '0' && text[i + 2] <= '7' && text[i + 3] >= '0' && text[i + 3] <= '7') {
      out += static_cast<char>((text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 +
                               (text[i + 3] - '0'));
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

bool IsDevice(std::string_view id) {
  size_t colon = id.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == id.size()) return false;
  if (id.size() > 24) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    if (i != colon && (id[i] < '0' || id[i] > '9')) return false;
  }
  return true;
}

}  // namespace

StatusOr<std::string> MountDeviceFromMountinfo(std::string_view mountinfo,
                                               std::string_view mountpoint) {
  // Line: "<id> <parent> <major:minor> <root> <mount point> <options> ...".
  std::string found;
  size_t start = 0;
  while (start < mountinfo.size()) {
    size_t end = mountinfo.find('\n', start);
    if (end == std::string_view::npos) end = mountinfo.size();
    std::string_view line = mountinfo.substr(start, end - start);
    start = end + 1;
    std::vector<std::string_view> fields;
    size_t pos = 0;
    while (fields.size() < 5 && pos < line.size()) {
      size_t space = line.find(' ', pos);
      if (space == std::string_view::npos) space = line.size();
      fields.push_back(line.substr(pos, space - pos));
      pos = space + 1;
    }
    if (fields.size() < 5 || Unescape(fields[4]) != mountpoint) continue;
    if (!IsDevice(fields[2])) {
      return InvalidArgumentError("mountinfo line for " + std::string(mountpoint) +
                                  " has no major:minor device");
    }
    found = std::string(fields[2]);  // The last mount on a path is the visible one.
  }
  if (found.empty()) return NotFoundError("no mount at " + std::string(mountpoint));
  return found;
}

StatusOr<std::string> MountDevice(const std::string& mountpoint) {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return IoError("cannot read /proc/self/mountinfo");
  std::stringstream text;
  text << in.rdbuf();
  return MountDeviceFromMountinfo(text.str(), mountpoint);
}

Status SetReadaheadKb(const std::string& device, uint32_t kb, const std::string& sysfs_bdi_root) {
  if (!IsDevice(device)) return InvalidArgumentError("bad device id '" + device + "'");
  const std::string path = sysfs_bdi_root + "/" + device + "/read_ahead_kb";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "opening " + path);
  const std::string value = std::to_string(kb) + "\n";
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int err = errno;
  ::close(fd);
  if (n < 0) return ErrnoToStatus(err, "writing " + path);
  if (static_cast<size_t>(n) != value.size()) return IoError("short write to " + path);
  return Status::Ok();
}

}  // namespace cairn::fuse
