// Docker/OCI JSON seccomp profiles -> SeccompProfile (see handover.hpp for the format).
#include <seccomp.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <map>
#include <string_view>
#include <tuple>

#include <nlohmann/json.hpp>

#include "ctr/error.hpp"
#include "ctr/handover.hpp"

namespace ctr::runtime {
namespace {

using nlohmann::json;

// The profile being read, for messages: "FILE: syscalls[3].args[0].op: ..." (the launch
// adds "seccomp profile: " in front).
struct Reader {
  std::string fileName;

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(fileName + ": " + (where.empty() ? "" : where + ": ") + what);
  }

  void onlyKeys(const json& object, const std::string& where, std::initializer_list<std::string_view> known) const {
    if (!object.is_object()) fail(where, "expected an object");
    for (const auto& [key, value] : object.items()) {
      bool ok = key == "comment";
      for (auto k : known) ok = ok || key == k;
      if (!ok) fail(where, "unknown key '" + key + "'");
    }
  }

  std::string text(const json& value, const std::string& where) const {
    if (!value.is_string()) fail(where, "expected a string");
    return value.get<std::string>();
  }

  std::uint64_t number(const json& value, const std::string& where) const {
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0))
      fail(where, "expected a non-negative integer");
    return value.get<std::uint64_t>();
  }

  std::vector<std::string> texts(const json& value, const std::string& where) const {
    if (!value.is_array()) fail(where, "expected a list of strings");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < value.size(); ++i) out.push_back(text(value[i], where + "[" + std::to_string(i) + "]"));
    return out;
  }
};

// containers/common's profiles also name the errno ("errno": "EPERM"); the number wins.
unsigned errnoFromName(const Reader& r, const std::string& name, const std::string& where) {
  static const std::map<std::string, unsigned, std::less<>> known{
      {"EPERM", EPERM}, {"ENOENT", ENOENT}, {"EACCES", EACCES}, {"EINVAL", EINVAL},
      {"ENOSYS", ENOSYS}, {"EOPNOTSUPP", EOPNOTSUPP}, {"ENOTSUP", ENOTSUP}};
  auto it = known.find(name);
  if (it == known.end()) r.fail(where, "unknown errno name '" + name + "' (give the number as errnoRet)");
  return it->second;
}

struct ActionKeys {
  const char* action;     // "action" or "defaultAction"
  const char* errnoRet;   // "errnoRet" or "defaultErrnoRet"
  const char* errnoName;  // "errno" or "defaultErrno"
};

SeccompAction parseAction(const Reader& r, const json& entry, const ActionKeys& keys, const std::string& where) {
  auto at = [&](const char* key) { return where.empty() ? std::string(key) : where + "." + key; };
  auto it = entry.find(keys.action);
  if (it == entry.end()) r.fail(where, std::string("no ") + keys.action);
  const std::string name = r.text(*it, at(keys.action));
  using Kind = SeccompAction::Kind;
  static const std::map<std::string, Kind, std::less<>> kinds{
      {"SCMP_ACT_ALLOW", Kind::Allow},         {"SCMP_ACT_ERRNO", Kind::Errno},
      {"SCMP_ACT_KILL", Kind::KillThread},     {"SCMP_ACT_KILL_THREAD", Kind::KillThread},
      {"SCMP_ACT_KILL_PROCESS", Kind::KillProcess}, {"SCMP_ACT_TRAP", Kind::Trap},
      {"SCMP_ACT_LOG", Kind::Log}};
  auto kind = kinds.find(name);
  if (kind == kinds.end()) {
    if (name == "SCMP_ACT_TRACE" || name == "SCMP_ACT_NOTIFY")
      r.fail(at(keys.action), name + " needs a tracer or seccomp agent, which ctr does not run");
    r.fail(at(keys.action), "unknown action '" + name + "'");
  }
  SeccompAction action{kind->second, 0};
  if (action.kind != Kind::Errno) return action;
  action.errnoValue = EPERM;
  if (auto e = entry.find(keys.errnoRet); e != entry.end()) {
    action.errnoValue = static_cast<unsigned>(r.number(*e, at(keys.errnoRet)));
    if (action.errnoValue > 4095) r.fail(at(keys.errnoRet), "an errno is at most 4095");
  } else if (auto n = entry.find(keys.errnoName); n != entry.end()) {
    action.errnoValue = errnoFromName(r, r.text(*n, at(keys.errnoName)), at(keys.errnoName));
  }
  return action;
}

SeccompArgCondition parseArg(const Reader& r, const json& arg, const std::string& where) {
  r.onlyKeys(arg, where, {"index", "value", "valueTwo", "op"});
  using Op = SeccompArgCondition::Op;
  static const std::map<std::string, Op, std::less<>> ops{
      {"SCMP_CMP_NE", Op::NotEqual},       {"SCMP_CMP_LT", Op::Less},    {"SCMP_CMP_LE", Op::LessOrEqual},
      {"SCMP_CMP_EQ", Op::Equal},          {"SCMP_CMP_GE", Op::GreaterOrEqual},
      {"SCMP_CMP_GT", Op::Greater},        {"SCMP_CMP_MASKED_EQ", Op::MaskedEqual}};
  SeccompArgCondition c;
  if (!arg.contains("index") || !arg.contains("op")) r.fail(where, "an argument needs index and op");
  c.index = static_cast<unsigned>(r.number(arg["index"], where + ".index"));
  if (c.index > 5) r.fail(where + ".index", "a syscall has arguments 0 to 5");
  const std::string op = r.text(arg["op"], where + ".op");
  auto found = ops.find(op);
  if (found == ops.end()) r.fail(where + ".op", "unknown operator '" + op + "'");
  c.op = found->second;
  if (arg.contains("value")) c.value = r.number(arg["value"], where + ".value");
  if (arg.contains("valueTwo")) c.valueTwo = r.number(arg["valueTwo"], where + ".valueTwo");
  return c;
}

// This node, as an entry's includes/excludes see it.
struct Node {
  std::uint32_t arch = seccomp_arch_native();
  std::string goArch;               // "amd64", as Docker's profiles name architectures
  std::tuple<int, int> kernel{0, 0};  // major, minor
};

Node thisNode() {
  Node node;
  static const std::map<std::uint32_t, std::string> goNames{
      {SCMP_ARCH_X86_64, "amd64"}, {SCMP_ARCH_X86, "386"},       {SCMP_ARCH_AARCH64, "arm64"},
      {SCMP_ARCH_ARM, "arm"},      {SCMP_ARCH_PPC64LE, "ppc64le"}, {SCMP_ARCH_S390X, "s390x"},
      {SCMP_ARCH_RISCV64, "riscv64"}};
  if (auto it = goNames.find(node.arch); it != goNames.end()) node.goArch = it->second;
  utsname u{};
  if (::uname(&u) == 0) std::sscanf(u.release, "%d.%d", &std::get<0>(node.kernel), &std::get<1>(node.kernel));
  return node;
}

// Whether an entry's includes/excludes keep it on this node. Containers have no
// capabilities, so "caps" in includes leaves the entry out and in excludes never does.
bool appliesHere(const Reader& r, const json& entry, const Node& node, const std::string& where) {
  auto matches = [&](const json& filter, const std::string& at) {
    r.onlyKeys(filter, at, {"arches", "caps", "minKernel"});
    bool any = false, all = true;
    if (filter.contains("arches")) {
      auto arches = r.texts(filter["arches"], at + ".arches");
      bool hit = std::find(arches.begin(), arches.end(), node.goArch) != arches.end();
      any = any || hit;
      all = all && hit;
    }
    if (filter.contains("caps") && !r.texts(filter["caps"], at + ".caps").empty()) all = false;
    if (filter.contains("minKernel")) {
      const std::string text = r.text(filter["minKernel"], at + ".minKernel");
      std::tuple<int, int> min{0, 0};
      if (std::sscanf(text.c_str(), "%d.%d", &std::get<0>(min), &std::get<1>(min)) != 2)
        r.fail(at + ".minKernel", "expected MAJOR.MINOR, got '" + text + "'");
      const bool hit = node.kernel >= min;
      any = any || hit;
      all = all && hit;
    }
    return std::pair{any, all};
  };
  if (entry.contains("includes") && !matches(entry["includes"], where + ".includes").second) return false;
  if (entry.contains("excludes") && matches(entry["excludes"], where + ".excludes").first) return false;
  return true;
}

std::uint32_t parseArch(const Reader& r, const json& value, const std::string& where) {
  std::string name = r.text(value, where);
  const std::string token = name.starts_with("SCMP_ARCH_") ? name.substr(10) : name;
  std::string lower;
  for (char c : token) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::uint32_t arch = seccomp_arch_resolve_name(lower.c_str());
  if (arch == 0) r.fail(where, "unknown architecture '" + name + "'");
  return arch;
}

// architectures: as listed; archMap: the native entry and its subArchitectures.
std::vector<std::uint32_t> parseArchitectures(const Reader& r, const json& doc, const Node& node) {
  std::vector<std::uint32_t> out;
  if (auto list = doc.find("architectures"); list != doc.end()) {
    if (!list->is_array()) r.fail("architectures", "expected a list");
    for (std::size_t i = 0; i < list->size(); ++i)
      out.push_back(parseArch(r, (*list)[i], "architectures[" + std::to_string(i) + "]"));
  }
  if (auto map = doc.find("archMap"); map != doc.end()) {
    if (!map->is_array()) r.fail("archMap", "expected a list");
    for (std::size_t i = 0; i < map->size(); ++i) {
      const std::string where = "archMap[" + std::to_string(i) + "]";
      r.onlyKeys((*map)[i], where, {"architecture", "subArchitectures"});
      if (parseArch(r, (*map)[i].value("architecture", json()), where + ".architecture") != node.arch) continue;
      out.push_back(node.arch);
      if (auto subs = (*map)[i].find("subArchitectures"); subs != (*map)[i].end()) {
        if (!subs->is_array()) r.fail(where + ".subArchitectures", "expected a list");
        for (std::size_t k = 0; k < subs->size(); ++k)
          out.push_back(parseArch(r, (*subs)[k], where + ".subArchitectures[" + std::to_string(k) + "]"));
      }
    }
    if (out.empty()) out.push_back(node.arch);
  }
  return out;
}

std::vector<std::string> entryNames(const Reader& r, const json& entry, const std::string& where) {
  std::vector<std::string> names;
  if (entry.contains("names")) names = r.texts(entry["names"], where + ".names");
  if (entry.contains("name")) names.push_back(r.text(entry["name"], where + ".name"));
  if (names.empty()) r.fail(where, "no syscall names");
  return names;
}

// Adds an entry's rules; a later rule for the same syscall and conditions replaces one.
void addEntry(const Reader& r, const json& entry, const std::string& where, SeccompProfile& profile,
              std::map<std::string, std::size_t>& index) {
  const SeccompAction action = parseAction(r, entry, {"action", "errnoRet", "errno"}, where);
  std::vector<SeccompArgCondition> conditions;
  if (auto args = entry.find("args"); args != entry.end() && !args->is_null()) {
    if (!args->is_array()) r.fail(where + ".args", "expected a list");
    for (std::size_t i = 0; i < args->size(); ++i)
      conditions.push_back(parseArg(r, (*args)[i], where + ".args[" + std::to_string(i) + "]"));
  }
  std::string conditionKey;
  for (const auto& c : conditions)
    conditionKey += ' ' + std::to_string(c.index) + ':' + std::to_string(static_cast<int>(c.op)) + ':' +
                    std::to_string(c.value) + ':' + std::to_string(c.valueTwo);
  for (const auto& name : entryNames(r, entry, where)) {
    if (seccomp_syscall_resolve_name(name.c_str()) == __NR_SCMP_ERROR) {
      profile.unknownSyscalls.push_back(name);
      continue;
    }
    SeccompRule rule{name, action, conditions, where};
    auto [it, added] = index.emplace(name + conditionKey, profile.rules.size());
    if (added) {
      profile.rules.push_back(std::move(rule));
    } else {
      profile.rules[it->second] = std::move(rule);
    }
  }
}

}  // namespace

SeccompProfile parseSeccompProfile(std::string_view text, const std::string& fileName) {
  const Reader r{fileName};
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded())
    r.fail("", "not valid JSON (ctr reads Docker/OCI JSON seccomp profiles; etc/ctr/seccomp-default.json is one)");
  r.onlyKeys(doc, "", {"defaultAction", "defaultErrnoRet", "defaultErrno", "architectures", "archMap", "syscalls", "flags",
                       "listenerPath", "listenerMetadata"});
  for (const char* unsupported : {"listenerPath", "listenerMetadata"})
    if (doc.contains(unsupported)) r.fail(unsupported, "needs a seccomp agent, which ctr does not run");
  if (doc.contains("flags") && !r.texts(doc["flags"], "flags").empty())
    r.fail("flags", "seccomp filter flags are not supported (ctr installs the filter with prctl)");
  SeccompProfile profile;
  profile.source = fileName;
  profile.defaultAction = parseAction(r, doc, {"defaultAction", "defaultErrnoRet", "defaultErrno"}, "");
  const Node node = thisNode();
  profile.architectures = parseArchitectures(r, doc, node);
  std::map<std::string, std::size_t> index;
  if (auto syscalls = doc.find("syscalls"); syscalls != doc.end() && !syscalls->is_null()) {
    if (!syscalls->is_array()) r.fail("syscalls", "expected a list");
    for (std::size_t i = 0; i < syscalls->size(); ++i) {
      const std::string where = "syscalls[" + std::to_string(i) + "]";
      r.onlyKeys((*syscalls)[i], where, {"names", "name", "action", "errnoRet", "errno", "args", "includes", "excludes"});
      if (appliesHere(r, (*syscalls)[i], node, where)) addEntry(r, (*syscalls)[i], where, profile, index);
    }
  }
  return profile;
}

}  // namespace ctr::runtime
