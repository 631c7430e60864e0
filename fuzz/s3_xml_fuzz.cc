// Fuzzes the parsers of what an S3 server sends (listing, multipart and error documents, date
// and ETag headers): any bytes must parse to a value or an error, never crash or overflow.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ufs/s3_xml.h"

using namespace cairn::ufs::s3;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ParseListObjectsV2(text);
  (void)ParseS3Error(text);
  (void)ParseInitiateMultipartUpload(text);
  S3ErrorBody error;
  (void)ParseCompleteMultipartUpload(text, &error);
  (void)ParseHttpDate(text);
  (void)ParseIso8601(text);
  (void)StripETagQuotes(text);
  return 0;
}
