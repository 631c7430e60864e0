// Pieces of the Prometheus text exposition format 0.0.4 (escaping, numbers, name rules), shared by
// the Registry and its tests. Pure functions; thread-safe.
// Reference: https://prometheus.io/docs/instrumenting/exposition_formats/
#ifndef CAIRN_METRICS_TEXT_FORMAT_H_
#define CAIRN_METRICS_TEXT_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace cairn::metrics {

// Appends `help` with '\' as "\\" and newline as "\n" (the HELP line escapes).
void AppendEscapedHelp(std::string_view help, std::string* out);

// Appends `value` with '\' as "\\", '"' as "\"" and newline as "\n" (label value escapes).
void AppendEscapedLabelValue(std::string_view value, std::string* out);

// Appends text that reads back as exactly `value`: a plain integer for integral values below
// 2^53, else the shortest round-trip form ("0.25", "1e-05", "1e+300"); or "+Inf", "-Inf", "NaN".
void AppendDouble(double value, std::string* out);
void AppendUint(uint64_t value, std::string* out);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]* and not starting with "__" (reserved for Prometheus itself).
bool IsValidLabelName(std::string_view name);

}  // namespace cairn::metrics

#endif  // CAIRN_METRICS_TEXT_FORMAT_H_
