// Text renderings of a SIF, identical to siftool's (internal/app/siftool/info.go).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <utility>
#include <vector>

#include "ctr/sif.hpp"

namespace ctr::image::sif {

namespace {

// Go tabwriter with two columns: labels padded to the longest label + `padding`.
std::string twoColumns(const std::vector<std::pair<std::string, std::string>>& rows,
                       std::size_t padding, const std::string& indent) {
  std::size_t width = 0;
  for (const auto& [label, value] : rows) width = std::max(width, label.size());
  std::string out;
  for (const auto& [label, value] : rows) {
    out += indent + label + std::string(width + padding - label.size(), ' ') + value + '\n';
  }
  return out;
}

std::string groupText(const Descriptor& d) {
  return d.group() == 0 ? "NONE" : std::to_string(d.group());
}

std::string hashName(std::int32_t t) {
  std::string name = hashTypeName(t);
  return name == "Unknown" ? "unknown hash value " + std::to_string(t) : name;
}

std::string typeDetails(const Descriptor& d) {
  std::string name = dataTypeName(d.dataType);
  switch (static_cast<DataType>(d.dataType)) {
    case DataType::Partition:
      return name + " (" + fsTypeName(d.fsType()) + "/" + partTypeName(d.partType()) + "/" +
             archName(d.partArch()) + ")";
    case DataType::Signature: return name + " (" + hashName(d.extraInt32(0)) + ")";
    case DataType::CryptoMessage:
      return name + " (" + cryptoFormatName(d.extraInt32(0)) + "/" + cryptoMessageName(d.extraInt32(4)) + ")";
    case DataType::Sbom: return name + " (" + sbomFormatName(d.extraInt32(0)) + ")";
    default: return name;
  }
}

}  // namespace

std::string formatTime(std::int64_t unixSeconds) {
  std::time_t t = static_cast<std::time_t>(unixSeconds);
  std::tm tm{};
  if (::gmtime_r(&t, &tm) == nullptr) return std::to_string(unixSeconds);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S +0000 UTC", &tm);
  return buf;
}

std::string readableSize(std::int64_t size) {
  if (size < 1024) return std::to_string(size) + " B";
  static constexpr const char* kUnits = "KMGTPE";
  auto usize = static_cast<std::uint64_t>(size);
  std::uint64_t div = 1024;
  int exp = 0;
  for (std::uint64_t n = usize / 1024; n >= 1024; n /= 1024) {
    div *= 1024;
    ++exp;
  }
  char buf[64];
  // Rounded half up in integers (std::round alone made ctr load libm).
  std::snprintf(buf, sizeof buf, "%llu %ciB", static_cast<unsigned long long>((usize + div / 2) / div), kUnits[exp]);
  return buf;
}

std::string formatHeader(const Header& h) {
  std::vector<std::pair<std::string, std::string>> rows;
  std::string launch = h.launchScriptText();
  if (!launch.empty()) {
    if (launch.back() == '\n') launch.pop_back();
    rows.emplace_back("Launch Script:", launch);
  }
  rows.emplace_back("Version:", "01");
  if (std::string arch = archName(h.arch); arch != "unknown") rows.emplace_back("Primary Architecture:", arch);
  if (!h.idIsNil()) rows.emplace_back("ID:", uuidToString(h.id));
  if (h.createdAt != kDeterministicTime) rows.emplace_back("Created At:", formatTime(h.createdAt));
  if (h.modifiedAt != kDeterministicTime) rows.emplace_back("Modified At:", formatTime(h.modifiedAt));
  rows.emplace_back("Descriptors Free:", std::to_string(h.descriptorsFree));
  rows.emplace_back("Descriptors Total:", std::to_string(h.descriptorsTotal));
  rows.emplace_back("Descriptors Offset:", std::to_string(h.descriptorsOffset));
  rows.emplace_back("Descriptors Size:", readableSize(h.descriptorsSize));
  rows.emplace_back("Data Offset:", std::to_string(h.dataOffset));
  rows.emplace_back("Data Size:", readableSize(h.dataSize));
  return twoColumns(rows, 1, "");
}

std::string formatList(const Image& image) {
  const std::string rule(78, '-');
  std::string out = rule + "\nID   |GROUP   |LINK    |SIF POSITION (start-end)  |TYPE\n" + rule + "\n";
  char buf[128];
  for (const auto& d : image.slots()) {
    if (!d.used) continue;
    std::snprintf(buf, sizeof buf, "%-4" PRIu32 " ", d.id);
    out += buf;
    std::snprintf(buf, sizeof buf, "|%-7s ", groupText(d).c_str());
    out += buf;
    if (d.linkedIdRaw == 0) {
      out += "|NONE    ";
    } else if (d.linkIsGroup()) {
      std::snprintf(buf, sizeof buf, "|%-3" PRIu32 " (G) ", d.link());
      out += buf;
    } else {
      std::snprintf(buf, sizeof buf, "|%-7" PRIu32 " ", d.link());
      out += buf;
    }
    std::string pos = "|" + std::to_string(d.offset) + "-" + std::to_string(d.offset + d.size) + " ";
    std::snprintf(buf, sizeof buf, "%-26s ", pos.c_str());
    out += buf;
    out += "|" + typeDetails(d) + "\n";
  }
  return out;
}

std::string formatInfo(const Descriptor& d) {
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("Data Type:", dataTypeName(d.dataType));
  rows.emplace_back("ID:", std::to_string(d.id));
  rows.emplace_back("Group ID:", groupText(d));
  rows.emplace_back("Linked ID:", d.linkedIdRaw == 0 ? "NONE"
                                  : d.linkIsGroup() ? std::to_string(d.link()) + " (G)"
                                                    : std::to_string(d.link()));
  rows.emplace_back("Offset:", std::to_string(d.offset));
  rows.emplace_back("Size:", std::to_string(d.size));
  if (d.createdAt != kDeterministicTime) rows.emplace_back("Created At:", formatTime(d.createdAt));
  if (d.modifiedAt != kDeterministicTime) rows.emplace_back("Modified At:", formatTime(d.modifiedAt));
  if (std::string name = d.nameText(); !name.empty()) rows.emplace_back("Name:", name);
  switch (static_cast<DataType>(d.dataType)) {
    case DataType::Partition:
      rows.emplace_back("Filesystem Type:", fsTypeName(d.fsType()));
      rows.emplace_back("Partition Type:", partTypeName(d.partType()));
      rows.emplace_back("Architecture:", archName(d.partArch()));
      break;
    case DataType::Signature: {
      rows.emplace_back("Hash Type:", hashName(d.extraInt32(0)));
      bool any = false;
      std::string hex;
      static constexpr char kHex[] = "0123456789ABCDEF";
      for (std::size_t i = 4; i < 24; ++i) {
        any = any || d.extra[i] != 0;
        hex += kHex[d.extra[i] >> 4];
        hex += kHex[d.extra[i] & 0xF];
      }
      if (any) rows.emplace_back("Entity:", hex);
      break;
    }
    case DataType::CryptoMessage:
      rows.emplace_back("Format Type:", cryptoFormatName(d.extraInt32(0)));
      rows.emplace_back("Message Type:", cryptoMessageName(d.extraInt32(4)));
      break;
    case DataType::Sbom: rows.emplace_back("Format:", sbomFormatName(d.extraInt32(0))); break;
    case DataType::OciRootIndex:
    case DataType::OciBlob: rows.emplace_back("Digest:", d.extraText()); break;
    default: break;
  }
  return twoColumns(rows, 2, "  ");
}

}  // namespace ctr::image::sif
