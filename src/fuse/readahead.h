// Kernel readahead of a FUSE mount.
//
// The kernel reads ahead of a sequential reader of a FUSE file by at most the mount's
// read_ahead_kb (its backing device info, /sys/class/bdi/<major:minor>/). It starts at 128 KiB,
// and the INIT handshake can only lower it (the kernel offers its current value, libfuse answers
// with the minimum of both sides). With 128 KiB a reader of a large warm file keeps about one
// 1 MiB request in flight; with several MiB the kernel sends the next requests while the
// previous ones are copied, and more FUSE threads work at once (docs/fuse.md). Only writing the
// sysfs file after INIT raises it, which needs root; elsewhere the kernel default stays.
#ifndef CAIRN_FUSE_READAHEAD_H_
#define CAIRN_FUSE_READAHEAD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace cairn::fuse {

// The "major:minor" device of the last mount at `mountpoint` (a canonical absolute path) in
// `mountinfo` (the text of /proc/self/mountinfo; mount points there escape ' ', '\t', '\n' and
// '\\' as octal). NotFound if no line names it, InvalidArgument for a malformed line naming it.
StatusOr<std::string> MountDeviceFromMountinfo(std::string_view mountinfo,
                                               std::string_view mountpoint);

// Reads /proc/self/mountinfo and returns the device of `mountpoint`, as above.
StatusOr<std::string> MountDevice(const std::string& mountpoint);

// Sets the kernel readahead of the mount on `device` to `kb` KiB by writing
// `sysfs_bdi_root`/<device>/read_ahead_kb. InvalidArgument for a device that is not
// "<digits>:<digits>"; PermissionDenied without the right to write it (not root); IoError else.
Status SetReadaheadKb(const std::string& device, uint32_t kb,
                      const std::string& sysfs_bdi_root = "/sys/class/bdi");

}  // namespace cairn::fuse

#endif  // CAIRN_FUSE_READAHEAD_H_
