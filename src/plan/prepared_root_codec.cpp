// The prepared-root spec as the launch sends it to the image's holder, and back.
#include <nlohmann/json.hpp>

#include "ctr/error.hpp"
#include "ctr/launch.hpp"

namespace ctr::launch {

namespace {

nlohmann::json groupJson(const host::HostGroup& g) { return {{"gid", g.gid}, {"name", g.name}}; }
host::HostGroup groupFrom(const nlohmann::json& j) { return {j.at("gid").get<gid_t>(), j.at("name").get<std::string>()}; }

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
                         {"tmpfs_mode", m.tmpfsMode},
                         {"prebind", m.prebind}};
    if (m.tmpfsSizeBytes) mj["tmpfs_size_bytes"] = *m.tmpfsSizeBytes;
    j["mounts"].push_back(std::move(mj));
  }
  const host::HostUser& u = spec.user;
  j["user"] = {{"uid", u.uid},     {"gid", u.gid},     {"name", u.name},
               {"gecos", u.gecos}, {"home", u.home},   {"shell", u.shell},
               {"primary_group", groupJson(u.primaryGroup)}};
  j["user"]["groups"] = nlohmann::json::array();
  for (const auto& g : u.groups) j["user"]["groups"].push_back(groupJson(g));
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
      m.tmpfsMode = mj.at("tmpfs_mode").get<unsigned>();
      m.prebind = mj.at("prebind").get<bool>();
      if (mj.contains("tmpfs_size_bytes")) m.tmpfsSizeBytes = mj.at("tmpfs_size_bytes").get<std::uint64_t>();
      spec.mounts.push_back(std::move(m));
    }
    const auto& uj = j.at("user");
    host::HostUser& u = spec.user;
    u.uid = uj.at("uid").get<uid_t>();
    u.gid = uj.at("gid").get<gid_t>();
    u.name = uj.at("name").get<std::string>();
    u.gecos = uj.at("gecos").get<std::string>();
    u.home = uj.at("home").get<std::string>();
    u.shell = uj.at("shell").get<std::string>();
    u.primaryGroup = groupFrom(uj.at("primary_group"));
    for (const auto& g : uj.at("groups")) u.groups.push_back(groupFrom(g));
    return spec;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("bad prepared-root spec from the launch: ") + e.what());
  }
}

}  // namespace ctr::launch
