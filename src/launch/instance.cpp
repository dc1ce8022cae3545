// Instances: the join record's JSON form, instance names and where an instance's files go
// (planJoin, the launch into a running instance, is in plan.cpp with the other planners).
#include "ctr/instance.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "ctr/error.hpp"
#include "ctr/pathutil.hpp"

namespace ctr::launch {

namespace {

// The namespaces a join may enter, in the order it enters them: the user namespace first
// (it owns the others), the mount namespace next (its root becomes the launch's), the PID
// namespace last (only the launch's children go there).
constexpr std::string_view kJoinOrder[] = {"user", "mnt", "ipc", "uts", "net", "pid"};

std::string percentEncoded(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte == '%' || byte < 0x20 || byte == 0x7f) {
      out += '%';
      out += hex[byte >> 4];
      out += hex[byte & 15];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string instanceJoinInfo(const InstanceRecord& r, const std::vector<std::string>& callerEnvironment) {
  std::string out = "name=" + r.name + "\nimage=" + percentEncoded(r.image) + "\nkeeper=" + std::to_string(r.keeper) +
                    "\nkeeper_start=" + std::to_string(r.keeperStart) + "\n";
  for (const auto& ns : r.namespaces) out += "ns=" + ns.type + ":" + std::to_string(ns.inode) + "\n";
  if (!r.seccomp.empty()) out += "seccomp=" + percentEncoded(r.seccomp) + "\n";
  out += "no_new_privs=1\n";
  // A --fakeroot instance's launches keep root's capabilities in its user namespace, as its
  // keeper does (apt-get, chown, a tmpfs mount work there); every other join drops them all.
  if (r.fakeroot) out += "keep_capabilities=1\n";
  auto nameOf = [](std::string_view kv) { return kv.substr(0, kv.find('=')); };
  auto has = [](const std::vector<std::string>& env, const std::string& kv) {
    return std::find(env.begin(), env.end(), kv) != env.end();
  };
  auto hasName = [&nameOf](const std::vector<std::string>& env, std::string_view name) {
    return std::any_of(env.begin(), env.end(), [&](const std::string& kv) { return nameOf(kv) == name; });
  };
  // Records of earlier versions have no start environment: the caller's stands for it.
  const auto& start = r.startEnvironment.empty() ? callerEnvironment : r.startEnvironment;
  // PWD is each joining process's own (it changes to its own working directory).
  for (const auto& kv : r.environment)
    if (nameOf(kv) != "PWD" && !has(start, kv) && !has(callerEnvironment, kv)) out += "set=" + percentEncoded(kv) + "\n";
  for (const auto& kv : start) {
    const auto name = nameOf(kv);
    if (!hasName(r.environment, name) && hasName(callerEnvironment, name))
      out += "unset=" + percentEncoded(std::string(name)) + "\n";
  }
  return out;
}

bool isValidInstanceName(std::string_view name) {
  return !name.empty() && name.size() <= 64 && name[0] != '.' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

std::optional<std::string> instanceReference(std::string_view image) {
  if (!image.starts_with(kInstanceScheme)) return std::nullopt;
  std::string name(image.substr(kInstanceScheme.size()));
  if (!isValidInstanceName(name))
    throw Error("bad instance reference '" + std::string(image) +
                "': an instance name is letters, digits, '_', '-' and '.' (at most 64, not starting with '.')")
        .withStatus(1);
  return name;
}

InstancePlan planInstanceFiles(const std::string& name, const std::string& stateDir) {
  if (!isValidInstanceName(name))
    throw Error("bad instance name '" + name +
                "': letters, digits, '_', '-' and '.' (at most 64, not starting with '.')")
        .withStatus(1);
  if (stateDir.empty())
    throw Error("instance " + name + ": no state directory of yours is free (/tmp/ctr-UID belongs to another "
                "user), and an instance needs one that later launches find: set XDG_RUNTIME_DIR");
  InstancePlan plan;
  plan.name = name;
  plan.dir = joinPath(stateDir, "instances");
  plan.record = joinPath(plan.dir, name + ".json");
  plan.lock = joinPath(plan.dir, name + ".lock");
  plan.logOut = joinPath(plan.dir, name + ".out");
  plan.logErr = joinPath(plan.dir, name + ".err");
  plan.seccomp = joinPath(plan.dir, name + ".bpf");
  plan.join = joinPath(plan.dir, name + ".join");
  return plan;
}

std::string instanceRecordToJson(const InstanceRecord& r) {
  nlohmann::json j = {{"name", r.name},       {"image", r.image},       {"started", r.started},
                      {"keeper", r.keeper},   {"keeper_start", r.keeperStart},
                      {"stand_in", r.standIn}, {"home", r.home},        {"workdir", r.workdir},
                      {"environment", r.environment}, {"start_environment", r.startEnvironment},
                      {"log_out", r.logOut}, {"log_err", r.logErr},
                      {"seccomp", r.seccomp}, {"fakeroot", r.fakeroot}, {"cgroups", r.cgroups}};
  j["namespaces"] = nlohmann::json::array();
  for (const auto& ns : r.namespaces) j["namespaces"].push_back({{"type", ns.type}, {"inode", ns.inode}});
  return j.dump(2) + "\n";
}

InstanceRecord instanceRecordFromJson(std::string_view text, const std::string& source) {
  try {
    const auto j = nlohmann::json::parse(text);
    InstanceRecord r;
    r.name = j.at("name").get<std::string>();
    r.image = j.at("image").get<std::string>();
    r.started = j.at("started").get<std::string>();
    r.keeper = j.at("keeper").get<pid_t>();
    r.keeperStart = j.at("keeper_start").get<std::uint64_t>();
    r.standIn = j.at("stand_in").get<pid_t>();
    r.home = j.at("home").get<std::string>();
    r.workdir = j.at("workdir").get<std::string>();
    r.environment = j.at("environment").get<std::vector<std::string>>();
    r.startEnvironment = j.value("start_environment", std::vector<std::string>{});
    r.logOut = j.at("log_out").get<std::string>();
    r.logErr = j.at("log_err").get<std::string>();
    r.seccomp = j.value("seccomp", "");
    r.fakeroot = j.value("fakeroot", false);
    if (j.contains("cgroups")) r.cgroups = j.at("cgroups").get<std::map<std::string, std::string>>();
    std::size_t next = 0;  // each type once, in kJoinOrder's order, user and mnt first
    for (const auto& nj : j.at("namespaces")) {
      JoinNamespace ns{nj.at("type").get<std::string>(), nj.at("inode").get<std::uint64_t>()};
      const auto* at = std::find(std::begin(kJoinOrder) + static_cast<std::ptrdiff_t>(next), std::end(kJoinOrder), ns.type);
      if (at == std::end(kJoinOrder)) throw Error("namespace '" + ns.type + "' unknown or out of order");
      next = static_cast<std::size_t>(at - std::begin(kJoinOrder)) + 1;
      r.namespaces.push_back(std::move(ns));
    }
    if (r.namespaces.size() < 2 || r.namespaces[0].type != "user" || r.namespaces[1].type != "mnt")
      throw Error("no user and mount namespace");
    if (r.keeper <= 1 || !isValidInstanceName(r.name)) throw Error("bad keeper or name");
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": not an instance record (" + e.what() + ")");
  } catch (const Error& e) {
    throw Error(source + ": not an instance record (" + e.oneLine() + ")");
  }
}

}  // namespace ctr::launch
