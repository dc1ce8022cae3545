#include "ctr/strings.hpp"
#include "ctr/binds.hpp"

#include <functional>

#include "ctr/error.hpp"
#include "ctr/pathutil.hpp"

namespace ctr::launch {
namespace {

// Splits at `sep` not escaped by a backslash; escapes are kept for the next split.
std::vector<std::string_view> splitUnescaped(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      ++i;
    } else if (text[i] == sep) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

// "\," and "\:" stand for ',' and ':' in a path (as in Apptainer); other backslashes stay.
std::string unescape(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 1 < field.size() && (field[i + 1] == ',' || field[i + 1] == ':')) ++i;
    out += field[i];
  }
  return out;
}

BindSpec makeBind(const std::string& source, const std::string& destination, const std::function<Error(const std::string&)>& bad,
                  const std::string& cwd = {}) {
  BindSpec bind;
  if (source.empty()) throw bad("empty source");
  if (source[0] != '/' && cwd.empty()) throw bad("source '" + source + "' is not absolute");
  bind.source = normalizePath(source[0] == '/' ? source : joinPath(cwd, source));
  if (destination.empty()) throw bad("empty destination");
  if (destination[0] != '/') throw bad("destination '" + destination + "' is not absolute");
  if (hasDotDotComponent(destination)) throw bad("destination '" + destination + "' contains '..'");
  bind.destination = normalizePath(destination);
  if (bind.destination == "/") throw bad("cannot bind over the container's '/'");
  return bind;
}


BindSpec parseOne(std::string_view spec, const std::string& cwd) {
  std::function<Error(const std::string&)> bad = [&](const std::string& why) {
    return Error("bad bind spec '" + std::string(spec) + "': " + why);
  };
  auto fields = splitUnescaped(spec, ':');
  if (fields.size() > 3) throw bad("too many ':' (expected src[:dst[:ro|rw]]; write a ':' in a path as '\\:')");
  const std::string source = unescape(fields[0]);
  BindSpec bind = makeBind(source, fields.size() >= 2 ? unescape(fields[1]) : source, bad, cwd);
  if (fields.size() < 3) return bind;
  bool rw = false;
  for (auto option : splitUnescaped(fields[2], ',')) {
    if (option == "ro") {
      bind.readOnly = true;
    } else if (option == "rw") {
      bind.readOnly = false;
      rw = true;
    } else if (option.starts_with("image-src=")) {
      const std::string path = unescape(option.substr(10));
      if (path.empty() || path[0] != '/') throw bad("image-src '" + path + "' is not an absolute path in the image");
      if (hasDotDotComponent(path)) throw bad("image-src '" + path + "' contains '..'");
      bind.imageSrc = normalizePath(path);
    } else if (option.starts_with("id=")) {
      throw bad("id= (a SIF data partition) is not supported: ctr mounts the SIF's primary squashfs partition");
    } else {
      throw bad("unknown option '" + std::string(option) + "' (ro, rw or image-src=PATH)");
    }
  }
  if (!bind.imageSrc.empty()) {
    if (rw) throw bad("a dataset image (image-src=) is mounted read-only, not rw");
    bind.readOnly = true;
  }
  return bind;
}

// An option after a bind's options belongs to that bind: "a:/d:image-src=/,ro".
bool isBindOption(std::string_view item) {
  return item == "ro" || item == "rw" || item.starts_with("image-src=") || item.starts_with("id=");
}

}  // namespace

std::vector<BindSpec> parseBindSpecs(std::string_view list, const std::string& cwd) {
  std::vector<std::string> specs;
  for (auto item : splitUnescaped(list, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    if (isBindOption(item) && !specs.empty() && splitUnescaped(specs.back(), ':').size() == 3)
      specs.back().append(",").append(item);
    else
      specs.emplace_back(item);
  }
  std::vector<BindSpec> binds;
  for (const auto& spec : specs) binds.push_back(parseOne(spec, cwd));
  return binds;
}

BindSpec parseMountSpec(std::string_view spec) {
  std::function<Error(const std::string&)> bad = [&](const std::string& why) {
    return Error("bad --mount '" + std::string(spec) + "': " + why);
  };
  // CSV fields (a field may be double-quoted, with "" for a quote), each key[=value].
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    const char c = spec[i];
    if (c == '"' && quoted && i + 1 < spec.size() && spec[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) throw bad("unterminated '\"'");
  std::string type, source, destination;
  bool readOnly = false;
  for (const auto& field : fields) {
    const auto eq = field.find('=');
    const std::string key = field.substr(0, eq), value = eq == std::string::npos ? "" : field.substr(eq + 1);
    if (key == "type") type = value;
    else if (key == "source" || key == "src") source = value;
    else if (key == "destination" || key == "dst" || key == "target") destination = value;
    else if (key == "ro" || key == "readonly") {
      if (eq == std::string::npos || value == "true" || value == "1") readOnly = true;
      else if (value == "false" || value == "0") readOnly = false;
      else throw bad("'" + field + "': readonly is true or false");
    } else if (field.empty()) {
      continue;
    } else {
      throw bad("unsupported field '" + key + "' (ctr supports type=bind, source, destination, readonly)");
    }
  }
  if (type.empty()) throw bad("no type= (ctr supports type=bind)");
  if (type != "bind") throw bad("type '" + type + "' is not supported (ctr supports type=bind)");
  if (source.empty()) throw bad("no source=");
  if (destination.empty()) throw bad("no destination=");
  BindSpec bind = makeBind(source, destination, bad);
  bind.readOnly = readOnly;
  return bind;
}

std::string toString(const BindSpec& bind) {
  if (!bind.imageSrc.empty()) return bind.source + ":" + bind.destination + ":image-src=" + bind.imageSrc;
  return bind.source + ":" + bind.destination + (bind.readOnly ? ":ro" : "");
}

}  // namespace ctr::launch
