// Fuzzes the write-back journal's record decoder (a file on the worker's disk, read back after a
// crash: damaged bytes must decode to a record or a Corruption, never a crash, an exception or
// UB), and checks that a decoded record encodes back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "write/journal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto record = cairn::write::DecodeJournalRecord(bytes);
  if (record.ok() && cairn::write::EncodeJournalRecord(*record) != bytes) std::abort();
  return 0;
}
