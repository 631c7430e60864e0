// EtcdProcess: a real single-member etcd (/usr/bin/etcd) in a child process on free loopback
// ports, for integration tests. Start() waits until /health answers; Kill() and Restart() (same
// data folder) let tests exercise outages. The destructor kills it by PID and removes the folder.
// If etcd is not installed, Start() fails with FailedPrecondition naming scripts/install-deps.sh.
// Thread-safety: not thread-safe; one owner.
#ifndef CAIRN_MEMBERSHIP_ETCD_PROCESS_H_
#define CAIRN_MEMBERSHIP_ETCD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace cairn::membership::testing {

class EtcdProcess {
 public:
  static StatusOr<std::unique_ptr<EtcdProcess>> Start();
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // "http://127.0.0.1:<client port>".
  std::string endpoint() const;
  // SIGKILLs the process and reaps it (the data folder stays).
  void Kill();
  // Starts it again on the same ports and data folder; waits for /health.
  Status Restart();
  std::string Log() const;

 private:
  EtcdProcess(std::string dir, int client_port, int peer_port)
      : dir_(std::move(dir)), client_port_(client_port), peer_port_(peer_port) {}
  Status Launch();

  std::string dir_;
  int client_port_;
  int peer_port_;
  pid_t pid_ = -1;
};

}  // namespace cairn::membership::testing

#endif  // CAIRN_MEMBERSHIP_ETCD_PROCESS_H_
