// The prepared-root spec as the launch sends it to the image's holder, and back; the
// manifest of the root the holder prepared, as it writes it and launches read it.
#include <algorithm>
#include <charconv>

#include <nlohmann/json.hpp>

#include "ctr/error.hpp"
#include "ctr/hash.hpp"
#include "ctr/launch.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/prepared_root.hpp"

namespace ctr::launch {

namespace {

nlohmann::json groupJson(const host::HostGroup& g) { return {{"gid", g.gid}, {"name", g.name}}; }
host::HostGroup groupFrom(const nlohmann::json& j) { return {j.at("gid").get<gid_t>(), j.at("name").get<std::string>()}; }

nlohmann::json userJson(const host::HostUser& u) {
  nlohmann::json j = {{"uid", u.uid},     {"gid", u.gid},   {"name", u.name},
                      {"gecos", u.gecos}, {"home", u.home}, {"shell", u.shell},
                      {"primary_group", groupJson(u.primaryGroup)}};
  j["groups"] = nlohmann::json::array();
  for (const auto& g : u.groups) j["groups"].push_back(groupJson(g));
  return j;
}

host::HostUser userFrom(const nlohmann::json& uj) {
  host::HostUser u;
  u.uid = uj.at("uid").get<uid_t>();
  u.gid = uj.at("gid").get<gid_t>();
  u.name = uj.at("name").get<std::string>();
  u.gecos = uj.at("gecos").get<std::string>();
  u.home = uj.at("home").get<std::string>();
  u.shell = uj.at("shell").get<std::string>();
  u.primaryGroup = groupFrom(uj.at("primary_group"));
  for (const auto& g : uj.at("groups")) u.groups.push_back(groupFrom(g));
  return u;
}

// An absolute container path of the manifest (a corrupt one must not name "../x").
std::string containerPath(const nlohmann::json& j) {
  auto path = j.get<std::string>();
  if (!path.starts_with('/') || hasDotDotComponent(path))
    throw Error("the prepared root's manifest names '" + path + "', not an absolute container path");
  return path;
}

}  // namespace

std::string preparedRootToJson(const PreparedRootSpec& spec) {
  nlohmann::json j;
  j["mounts"] = nlohmann::json::array();
  for (const auto& m : spec.mounts) {
    nlohmann::json mj = {{"kind", static_cast<int>(m.kind)},
                         {"source", m.source},
                         {"destination", m.destination},
                         {"readonly", m.readOnly},
                         {"recursive", m.recursive},
                         {"required", m.required},
                         {"origin", static_cast<int>(m.origin)},
                         {"content", m.content},
                         {"identity", static_cast<int>(m.identity)},
                         {"tmpfs_mode", m.tmpfsMode},
                         {"prebind", m.prebind}};
    if (m.tmpfsSizeBytes) mj["tmpfs_size_bytes"] = *m.tmpfsSizeBytes;
    j["mounts"].push_back(std::move(mj));
  }
  j["user"] = userJson(spec.user);
  return j.dump();
}

PreparedRootSpec preparedRootFromJson(std::string_view text) {
  try {
    auto j = nlohmann::json::parse(text);
    PreparedRootSpec spec;
    for (const auto& mj : j.at("mounts")) {
      Mount m;
      m.kind = static_cast<MountKind>(mj.at("kind").get<int>());
      m.source = mj.at("source").get<std::string>();
      m.destination = mj.at("destination").get<std::string>();
      m.readOnly = mj.at("readonly").get<bool>();
      m.recursive = mj.at("recursive").get<bool>();
      m.required = mj.at("required").get<bool>();
      m.origin = static_cast<MountOrigin>(mj.at("origin").get<int>());
      m.content = mj.at("content").get<std::string>();
      m.identity = static_cast<IdentityFile>(mj.at("identity").get<int>());
      m.tmpfsMode = mj.at("tmpfs_mode").get<unsigned>();
      m.prebind = mj.at("prebind").get<bool>();
      if (mj.contains("tmpfs_size_bytes")) m.tmpfsSizeBytes = mj.at("tmpfs_size_bytes").get<std::uint64_t>();
      spec.mounts.push_back(std::move(m));
    }
    spec.user = userFrom(j.at("user"));
    return spec;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("bad prepared-root spec from the launch: ") + e.what());
  }
}

std::string toJson(const PreparedRootManifest& manifest) {
  nlohmann::json j = {{"version", kPreparedRootManifestVersion}, {"user", userJson(manifest.user)}};
  j["prebound"] = nlohmann::json::array();
  for (const auto& p : manifest.prebound) {
    nlohmann::json pj = {{"kind", p.kind == MountKind::Tmpfs ? "tmpfs" : "bind"},
                         {"destination", p.destination},
                         {"source", p.source},
                         {"readonly", p.readOnly},
                         {"recursive", p.recursive},
                         {"tmpfs_mode", p.tmpfsMode}};
    if (p.tmpfsSizeBytes) pj["tmpfs_size_bytes"] = *p.tmpfsSizeBytes;
    j["prebound"].push_back(std::move(pj));
  }
  j["created"] = manifest.created;
  return j.dump(1);
}

PreparedRootManifest preparedRootManifestFromJson(std::string_view text) {
  try {
    const auto j = nlohmann::json::parse(text);
    const int version = j.at("version").get<int>();
    if (version != kPreparedRootManifestVersion)
      throw Error("the prepared root's manifest has format version " + std::to_string(version) + ", this ctr reads " +
                  std::to_string(kPreparedRootManifestVersion));
    PreparedRootManifest manifest;
    manifest.user = userFrom(j.at("user"));
    for (const auto& pj : j.at("prebound")) {
      PreboundMount p;
      const auto kind = pj.at("kind").get<std::string>();
      if (kind != "bind" && kind != "tmpfs")
        throw Error("the prepared root's manifest has a prebound mount of kind '" + kind + "'");
      p.kind = kind == "tmpfs" ? MountKind::Tmpfs : MountKind::Bind;
      p.destination = containerPath(pj.at("destination"));
      p.source = pj.at("source").get<std::string>();
      p.readOnly = pj.at("readonly").get<bool>();
      p.recursive = pj.at("recursive").get<bool>();
      p.tmpfsMode = pj.at("tmpfs_mode").get<unsigned>();
      if (pj.contains("tmpfs_size_bytes")) p.tmpfsSizeBytes = pj.at("tmpfs_size_bytes").get<std::uint64_t>();
      manifest.prebound.push_back(std::move(p));
    }
    for (const auto& target : j.at("created")) manifest.created.push_back(containerPath(target));
    return manifest;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("bad prepared-root manifest: ") + e.what());
  }
}


std::string toLine(const JoinMemo& memo) {
  std::string line = toHex16(memo.key);
  for (const auto& [index, present] : memo.answers)
    line += ' ' + std::to_string(index) + (present ? ":1" : ":0");
  return line + '\n';
}

std::vector<JoinMemo> parseJoinMemos(std::string_view text) {
  std::vector<JoinMemo> memos;
  auto number = [](std::string_view digits, int base, auto& into) {
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), into, base);
    return ec == std::errc{} && end == digits.data() + digits.size() && !digits.empty();
  };
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    if (newline == std::string_view::npos) break;  // a line still being written, or cut short
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline + 1);
    JoinMemo memo;
    bool good = line.size() >= 16 && number(line.substr(0, 16), 16, memo.key);
    std::string_view rest = good ? line.substr(16) : std::string_view{};
    while (good && !rest.empty()) {  // " INDEX:0|1" each
      good = rest[0] == ' ';
      rest.remove_prefix(1);
      const std::size_t end = std::min(rest.find(' '), rest.size());
      const std::string_view word = rest.substr(0, end), flag = word.substr(std::min(word.find(':'), word.size()));
      rest.remove_prefix(end);
      std::size_t index = 0;
      good = good && (flag == ":0" || flag == ":1") && number(word.substr(0, word.size() - 2), 10, index);
      if (good) memo.answers.emplace_back(index, flag == ":1");
    }
    if (good) memos.push_back(std::move(memo));
  }
  return memos;
}

}  // namespace ctr::launch
