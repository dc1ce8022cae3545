#include "ctr/strings.hpp"
#include "ctr/binds.hpp"

#include "ctr/error.hpp"
#include "ctr/pathutil.hpp"

namespace ctr::launch {
namespace {


BindSpec parseOne(std::string_view spec) {
  auto bad = [&](const std::string& why) {
    return Error("bad bind spec '" + std::string(spec) + "': " + why);
  };
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (true) {
    size_t colon = spec.find(':', pos);
    fields.push_back(spec.substr(pos, colon == std::string_view::npos ? colon : colon - pos));
    if (colon == std::string_view::npos) break;
    pos = colon + 1;
  }
  if (fields.size() > 3) throw bad("too many ':' (expected src[:dst[:ro|rw]])");

  BindSpec bind;
  if (fields[0].empty()) throw bad("empty source");
  if (fields[0][0] != '/') throw bad("source '" + std::string(fields[0]) + "' is not absolute");
  bind.source = normalizePath(fields[0]);

  std::string_view dst = fields.size() >= 2 ? fields[1] : fields[0];
  if (dst.empty()) throw bad("empty destination");
  if (dst[0] != '/') throw bad("destination '" + std::string(dst) + "' is not absolute");
  if (hasDotDotComponent(dst)) throw bad("destination '" + std::string(dst) + "' contains '..'");
  bind.destination = normalizePath(dst);
  if (bind.destination == "/") throw bad("cannot bind over the container's '/'");

  if (fields.size() == 3) {
    if (fields[2] == "ro") bind.readOnly = true;
    else if (fields[2] == "rw") bind.readOnly = false;
    else throw bad("unknown option '" + std::string(fields[2]) + "' (ro or rw)");
  }
  return bind;
}

}  // namespace

std::vector<BindSpec> parseBindSpecs(std::string_view list) {
  std::vector<BindSpec> binds;
  for (auto item : splitList(list)) binds.push_back(parseOne(item));
  return binds;
}

std::string toString(const BindSpec& bind) {
  return bind.source + ":" + bind.destination + (bind.readOnly ? ":ro" : "");
}

}  // namespace ctr::launch
