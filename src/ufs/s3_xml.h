// Parsing of S3 response documents (ListObjectsV2 results, error bodies) and header values
// (dates, ETags). Pure functions over strings, so they are unit-tested without a server.
// XML is parsed with pugixml, which reports errors as values (no exceptions). Thread-safe.
#ifndef CAIRN_UFS_S3_XML_H_
#define CAIRN_UFS_S3_XML_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "ufs/ufs.h"

namespace cairn::ufs::s3 {

struct ListObjectsPage {
  std::vector<ObjectInfo> objects;  // Keys exactly as the server sent them.
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken; set when truncated.
};

// Parses a ListBucketResult document. InvalidArgument for malformed XML, a different root
// element, or an entry with an unparsable Size/LastModified. Keys are taken verbatim (the request
// does not ask for encoding-type=url).
StatusOr<ListObjectsPage> ParseListObjectsV2(std::string_view xml);

struct S3ErrorBody {
  std::string code;  // "NoSuchKey", "AccessDenied", "SlowDown", ... ("" if none).
  std::string message;
  std::string resource;
  std::string request_id;
};

// Extracts <Error> fields; never fails (an empty or non-XML body, as with HEAD, yields empty
// fields).
S3ErrorBody ParseS3Error(std::string_view xml);

// The UploadId of an InitiateMultipartUploadResult. InvalidArgument for malformed XML, another
// root element, or an id that is empty, longer than 1024 bytes or not printable ASCII (it goes
// into URLs we sign).
StatusOr<std::string> ParseInitiateMultipartUpload(std::string_view xml);

// The ETag (quotes stripped) of a CompleteMultipartUploadResult. S3 can answer 200 and still
// fail: the body is then an <Error>, returned in `error` (with an InvalidArgument status naming
// its code) so the caller can map it like an HTTP failure. InvalidArgument for anything else.
StatusOr<std::string> ParseCompleteMultipartUpload(std::string_view xml, S3ErrorBody* error);

// The answer to CopyObject (`part` false) or UploadPartCopy (`part` true): the new object's or
// part's ETag (quotes stripped) and, where given, its LastModified (0 otherwise). A 200 answer
// can carry an <Error>, as for CompleteMultipartUpload.
struct CopyResult {
  std::string etag;
  int64_t mtime_ns = 0;
};
StatusOr<CopyResult> ParseCopyResult(std::string_view xml, bool part, S3ErrorBody* error);

struct CompletedPart {
  uint32_t number = 0;  // 1-based, as S3 numbers parts.
  std::string etag;     // As UploadPart returned it (quotes optional).
};

// The CompleteMultipartUpload request body listing `parts` (in ascending number order).
std::string BuildCompleteMultipartUpload(const std::vector<CompletedPart>& parts);

// "Wed, 12 Oct 2009 17:50:00 GMT" (RFC 7231 IMF-fixdate) -> nanoseconds since the epoch.
// InvalidArgument for a malformed date, a day the month does not have, or a time outside what
// int64 nanoseconds hold (before 1970 or after 2262-04-11T23:47:16.854775807Z).
StatusOr<int64_t> ParseHttpDate(std::string_view text);

// "2009-10-12T17:50:30.000Z" (ISO 8601, UTC, optional fraction) -> nanoseconds since the epoch.
// Errors as ParseHttpDate.
StatusOr<int64_t> ParseIso8601(std::string_view text);

// Removes a weak-validator prefix "W/" and surrounding double quotes: "\"abc\"" -> "abc".
std::string StripETagQuotes(std::string_view etag);

}  // namespace cairn::ufs::s3

#endif  // CAIRN_UFS_S3_XML_H_
