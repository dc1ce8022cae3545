// The result file of `ctr-bench run` (format "ctr-bench-result", version 1; the contract
// is docs/benchmark-guide.md, "Result file"): written atomically after every block, read
// back by `report` and `compare`.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace ctr::bench {

inline constexpr const char* kResultFormat = "ctr-bench-result";
inline constexpr int kResultVersion = 1;

// Parses and checks a result file; throws ctr::Error with one line naming the file and the
// problem (unreadable, not JSON, another format or version, a malformed workload list).
nlohmann::json readResultFile(const std::filesystem::path& file);
// The same checks on an already parsed document; `name` is used in messages.
void validateResult(const nlohmann::json& result, const std::string& name);

// Writes `result` to `file` through a temporary file in the same directory and a rename,
// so a reader (or Ctrl-C) never sees half a file.
void writeResultAtomic(const std::filesystem::path& file, const nlohmann::json& result);

}  // namespace ctr::bench
