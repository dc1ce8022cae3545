// --apply-cgroups FILE: Apptainer's cgroups TOML (the OCI runtime spec's LinuxResources
// written as TOML) read into a limits::Request. Parsed with toml++ (Debian's
// libtomlplusplus-dev), header-only in this one file so that ctr links no extra shared
// library on the launch path. Keys ctr cannot apply are refused by name, never ignored.
#define TOML_HEADER_ONLY 1
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include <string>

#include "ctr/error.hpp"
#include "ctr/limits.hpp"

namespace ctr::limits {

namespace {

constexpr const char* kSupported =
    "supported: [memory] limit, swap; [cpu] quota, period, cpus, mems; [pids] limit; [blockIO] weight";

std::int64_t integerAt(const toml::node& node, const std::string& where) {
  if (auto value = node.value<std::int64_t>()) return *value;
  throw Error(where + " must be an integer");
}

std::string stringAt(const toml::node& node, const std::string& where) {
  if (auto value = node.value<std::string>()) return *value;
  throw Error(where + " must be a string, e.g. \"0-3\"");
}

}  // namespace

Request parseCgroupsToml(std::string_view text, const std::string& fileName) {
  toml::table root;
  try {
    root = toml::parse(text, fileName);
  } catch (const toml::parse_error& e) {
    throw Error(fileName + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  Request request;
  std::optional<std::int64_t> quota, period;
  for (const auto& [sectionKey, sectionNode] : root) {
    const std::string section(sectionKey.str());
    const auto* table = sectionNode.as_table();
    if (!table) throw Error(fileName + ": '" + section + "' must be a [section] (" + kSupported + ")");
    for (const auto& [key, node] : *table) {
      const std::string name(key.str());
      const std::string where = fileName + ":" + std::to_string(node.source().begin.line) + ": [" + section + "] " + name;
      if (section == "memory" && name == "limit") {
        const auto bytes = integerAt(node, where);
        if (bytes <= 0) throw Error(where + " must be more than 0");
        request.memory = static_cast<std::uint64_t>(bytes);
      } else if (section == "memory" && name == "swap") {
        request.memorySwap = integerAt(node, where);
      } else if (section == "cpu" && name == "quota") {
        quota = integerAt(node, where);
      } else if (section == "cpu" && name == "period") {
        period = integerAt(node, where);
        if (*period <= 0) throw Error(where + " must be more than 0");
      } else if (section == "cpu" && name == "cpus") {
        request.cpusetCpus = formatIdList(parseIdList(stringAt(node, where), where));
      } else if (section == "cpu" && name == "mems") {
        request.cpusetMems = formatIdList(parseIdList(stringAt(node, where), where));
      } else if (section == "pids" && name == "limit") {
        request.pids = integerAt(node, where);
      } else if (section == "blockIO" && name == "weight") {
        request.blkioWeight = static_cast<std::uint32_t>(integerAt(node, where));
      } else {
        throw Error(where + " is not supported by ctr (" + kSupported + ")");
      }
    }
  }
  if (quota && *quota > 0) request.cpus = static_cast<double>(*quota) / static_cast<double>(period.value_or(100000));
  else if (period && !quota) throw Error(fileName + ": [cpu] period without quota");
  return request;
}

}  // namespace ctr::limits
