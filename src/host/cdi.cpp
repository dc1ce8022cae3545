// CDI specifications (ctr/cdi.hpp): JSON with nlohmann-json, YAML with libyaml, both read
// into one JSON value so that one extraction checks either syntax the same way. libyaml is
// loaded the first time a YAML spec is read (ctr/shared_library.hpp), not linked: a launch
// without devices never maps it. (yaml-cpp, linked before, also made every ctr process
// construct the standard streams before main: ctr/standard_streams.hpp.)
#include "ctr/cdi.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>
#include <yaml.h>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/shared_library.hpp"
#include "ctr/strings.hpp"

namespace ctr::host {
namespace {

using nlohmann::json;

// What ctr uses of libyaml, loaded once (throws ctr::Error naming the package to install).
struct YamlApi {
  decltype(&yaml_parser_initialize) parser_initialize;
  decltype(&yaml_parser_set_input_string) parser_set_input_string;
  decltype(&yaml_parser_load) parser_load;
  decltype(&yaml_parser_delete) parser_delete;
  decltype(&yaml_document_get_root_node) document_get_root_node;
  decltype(&yaml_document_get_node) document_get_node;
  decltype(&yaml_document_delete) document_delete;
};

const YamlApi& yamlApi() {
  static const YamlApi api = [] {
    const char* so = "libyaml-0.so.2";
    void* h = openLibrary(so, "libyaml-0-2");
    YamlApi a{};
    bindSymbol(h, so, "yaml_parser_initialize", a.parser_initialize);
    bindSymbol(h, so, "yaml_parser_set_input_string", a.parser_set_input_string);
    bindSymbol(h, so, "yaml_parser_load", a.parser_load);
    bindSymbol(h, so, "yaml_parser_delete", a.parser_delete);
    bindSymbol(h, so, "yaml_document_get_root_node", a.document_get_root_node);
    bindSymbol(h, so, "yaml_document_get_node", a.document_get_node);
    bindSymbol(h, so, "yaml_document_delete", a.document_delete);
    return a;
  }();
  return api;
}

// The parsed YAML document, freed with it.
struct YamlDocument {
  yaml_document_t doc{};
  bool loaded = false;
  ~YamlDocument() {
    if (loaded) yamlApi().document_delete(&doc);
  }
};

constexpr int kMaxYamlDepth = 64;  // deeper is no CDI spec (and an alias cycle ends here)

// YAML scalars stay strings; the extraction below accepts a string where it wants a number
// (major: "195"), and a number where it wants a string (a device named 0). A plain "~",
// "null", "Null", "NULL" or empty scalar is null, as YAML 1.2's core schema has it.
json yamlToJson(yaml_document_t& doc, const yaml_node_t* node, int depth) {
  const YamlApi& yaml = yamlApi();
  if (!node) return nullptr;
  if (depth > kMaxYamlDepth) throw Error("nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  switch (node->type) {
    case YAML_SCALAR_NODE: {
      const std::string value(reinterpret_cast<const char*>(node->data.scalar.value), node->data.scalar.length);
      if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
          (value.empty() || value == "~" || value == "null" || value == "Null" || value == "NULL"))
        return nullptr;
      return value;
    }
    case YAML_SEQUENCE_NODE: {
      json out = json::array();
      for (auto* item = node->data.sequence.items.start; item < node->data.sequence.items.top; ++item)
        out.push_back(yamlToJson(doc, yaml.document_get_node(&doc, *item), depth + 1));
      return out;
    }
    case YAML_MAPPING_NODE: {
      json out = json::object();
      for (auto* pair = node->data.mapping.pairs.start; pair < node->data.mapping.pairs.top; ++pair) {
        const yaml_node_t* key = yaml.document_get_node(&doc, pair->key);
        if (!key || key->type != YAML_SCALAR_NODE)
          throw Error("a mapping key at line " + std::to_string((key ? key->start_mark.line : 0) + 1) + " is not a scalar");
        const std::string name(reinterpret_cast<const char*>(key->data.scalar.value), key->data.scalar.length);
        out[name] = yamlToJson(doc, yaml.document_get_node(&doc, pair->value), depth + 1);
      }
      return out;
    }
    default:
      return nullptr;
  }
}

// `text` as JSON, and the line of each entry of its top-level "devices" sequence. Throws
// ctr::Error with libyaml's problem and where it is.
json parseYaml(std::string_view text, std::vector<int>& deviceLines) {
  const YamlApi& yaml = yamlApi();
  yaml_parser_t parser;
  if (!yaml.parser_initialize(&parser)) throw Error("cannot start the YAML parser");
  YamlDocument document;
  yaml.parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  document.loaded = yaml.parser_load(&parser, &document.doc) != 0;
  if (!document.loaded) {
    const std::string problem = std::string(parser.problem ? parser.problem : "unknown error") + " at line " +
                                std::to_string(parser.problem_mark.line + 1) + ", column " +
                                std::to_string(parser.problem_mark.column + 1);
    yaml.parser_delete(&parser);
    throw Error(problem);
  }
  yaml.parser_delete(&parser);
  const yaml_node_t* root = yaml.document_get_root_node(&document.doc);
  json out = yamlToJson(document.doc, root, 0);
  if (root && root->type == YAML_MAPPING_NODE)
    for (auto* pair = root->data.mapping.pairs.start; pair < root->data.mapping.pairs.top; ++pair) {
      const yaml_node_t* key = yaml.document_get_node(&document.doc, pair->key);
      const yaml_node_t* value = yaml.document_get_node(&document.doc, pair->value);
      if (key && key->type == YAML_SCALAR_NODE && value && value->type == YAML_SEQUENCE_NODE &&
          std::string_view(reinterpret_cast<const char*>(key->data.scalar.value), key->data.scalar.length) == "devices") {
        deviceLines.clear();
        for (auto* item = value->data.sequence.items.start; item < value->data.sequence.items.top; ++item)
          deviceLines.push_back(static_cast<int>(yaml.document_get_node(&document.doc, *item)->start_mark.line) + 1);
      }
    }
  return out;
}

std::string asString(const json& value, const std::string& where) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return std::to_string(value.get<std::int64_t>());
  throw Error(where + ": expected a string");
}

std::uint32_t asUint32(const json& value, const std::string& where) {
  std::int64_t n = -1;
  if (value.is_number_integer()) {
    n = value.get<std::int64_t>();
  } else if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    if (!s.empty() && s.size() <= 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      n = std::stoll(s);
  }
  if (n < 0 || n > 0xffffffffLL) throw Error(where + ": expected a number from 0 to 4294967295");
  return static_cast<std::uint32_t>(n);
}

const json* member(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string stringMember(const json& object, const char* key, const std::string& where, bool required) {
  const json* value = member(object, key);
  if (!value) {
    if (required) throw Error(where + ": '" + key + "' is missing");
    return {};
  }
  return asString(*value, where + "." + key);
}

std::vector<std::string> stringList(const json& object, const char* key, const std::string& where) {
  std::vector<std::string> out;
  const json* value = member(object, key);
  if (!value) return out;
  if (!value->is_array()) throw Error(where + "." + key + ": expected a list");
  for (size_t i = 0; i < value->size(); ++i) out.push_back(asString((*value)[i], where + "." + key + "[" + std::to_string(i) + "]"));
  return out;
}

template <typename F>
void forEachObject(const json& object, const char* key, const std::string& where, F&& each) {
  const json* value = member(object, key);
  if (!value) return;
  if (!value->is_array()) throw Error(where + "." + key + ": expected a list");
  for (size_t i = 0; i < value->size(); ++i) {
    const std::string at = where + "." + key + "[" + std::to_string(i) + "]";
    if (!(*value)[i].is_object()) throw Error(at + ": expected a mapping");
    each((*value)[i], at);
  }
}

std::string absolutePath(const json& object, const char* key, const std::string& where, bool required) {
  std::string path = stringMember(object, key, where, required);
  if (!path.empty() && path[0] != '/') throw Error(where + "." + key + ": '" + path + "' is not an absolute path");
  return path;
}

CdiEdits parseEdits(const json& object, const std::string& where) {
  if (!object.is_object()) throw Error(where + ": expected a mapping");
  CdiEdits edits;
  edits.env = stringList(object, "env", where);
  for (const auto& entry : edits.env)
    if (entry.find('=') == std::string::npos || entry[0] == '=')
      throw Error(where + ".env: '" + entry + "' is not NAME=VALUE");
  forEachObject(object, "deviceNodes", where, [&](const json& o, const std::string& at) {
    CdiDeviceNode node;
    node.path = absolutePath(o, "path", at, true);
    node.hostPath = absolutePath(o, "hostPath", at, false);
    node.type = stringMember(o, "type", at, false);
    node.permissions = stringMember(o, "permissions", at, false);
    edits.deviceNodes.push_back(std::move(node));
  });
  forEachObject(object, "mounts", where, [&](const json& o, const std::string& at) {
    CdiMount mount;
    mount.hostPath = absolutePath(o, "hostPath", at, true);
    mount.containerPath = absolutePath(o, "containerPath", at, true);
    mount.type = stringMember(o, "type", at, false);
    mount.options = stringList(o, "options", at);
    edits.mounts.push_back(std::move(mount));
  });
  forEachObject(object, "hooks", where, [&](const json& o, const std::string& at) {
    CdiHook hook;
    hook.hookName = stringMember(o, "hookName", at, true);
    hook.path = absolutePath(o, "path", at, true);
    hook.args = stringList(o, "args", at);
    hook.env = stringList(o, "env", at);
    edits.hooks.push_back(std::move(hook));
  });
  if (const json* gids = member(object, "additionalGids")) {
    if (!gids->is_array()) throw Error(where + ".additionalGids: expected a list");
    for (size_t i = 0; i < gids->size(); ++i)
      edits.additionalGids.push_back(asUint32((*gids)[i], where + ".additionalGids[" + std::to_string(i) + "]"));
  }
  return edits;
}

// kind = vendor "/" class; vendor a DNS-like name, class a name (CDI SPEC.md "kind").
const std::regex& kindPattern() {
  static const std::regex pattern("[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?/[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?");
  return pattern;
}
const std::regex& deviceNamePattern() {
  static const std::regex pattern("[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?");
  return pattern;
}

void appendEdits(CdiEdits& into, const CdiEdits& from, const std::string& label) {
  into.env.insert(into.env.end(), from.env.begin(), from.env.end());
  for (auto node : from.deviceNodes) {
    node.from = label;
    into.deviceNodes.push_back(std::move(node));
  }
  for (auto mount : from.mounts) {
    mount.from = label;
    into.mounts.push_back(std::move(mount));
  }
  into.hooks.insert(into.hooks.end(), from.hooks.begin(), from.hooks.end());
  into.additionalGids.insert(into.additionalGids.end(), from.additionalGids.begin(), from.additionalGids.end());
}

}  // namespace

CdiSpec parseCdiSpec(std::string_view text, const std::string& file) {
  json doc;
  std::vector<int> deviceLines;
  try {
    if (file.ends_with(".json")) {
      doc = json::parse(text);
    } else {
      try {
        (void)yamlApi();  // a missing libyaml is not the spec's fault
      } catch (const Error& e) {
        throw Error(file + ": " + e.what());
      }
      try {
        doc = parseYaml(text, deviceLines);
      } catch (const Error& e) {
        throw Error(file + ": not valid YAML: " + e.what());
      }
    }
  } catch (const json::exception& e) {
    throw Error(file + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object()) throw Error(file + ": expected a mapping with cdiVersion, kind and devices");
  CdiSpec spec;
  spec.file = file;
  spec.version = stringMember(doc, "cdiVersion", file, true);
  spec.kind = stringMember(doc, "kind", file, true);
  if (!std::regex_match(spec.kind, kindPattern()))
    throw Error(file + ": kind '" + spec.kind + "' is not vendor.com/class");
  if (const json* edits = member(doc, "containerEdits")) spec.edits = parseEdits(*edits, file + ": containerEdits");
  const json* devices = member(doc, "devices");
  if (!devices || !devices->is_array() || devices->empty()) throw Error(file + ": 'devices' must list at least one device");
  for (size_t i = 0; i < devices->size(); ++i) {
    const std::string at = file + ": devices[" + std::to_string(i) + "]";
    const json& d = (*devices)[i];
    if (!d.is_object()) throw Error(at + ": expected a mapping");
    CdiDevice device;
    device.name = stringMember(d, "name", at, true);
    if (i < deviceLines.size()) device.line = deviceLines[i];
    if (!std::regex_match(device.name, deviceNamePattern()))
      throw Error(at + ": device name '" + device.name + "' has characters CDI does not allow");
    const json* edits = member(d, "containerEdits");
    if (!edits) throw Error(at + ": 'containerEdits' is missing");
    device.edits = parseEdits(*edits, at + ".containerEdits");
    for (const auto& other : spec.devices)
      if (other.name == device.name) throw Error(at + ": device '" + device.name + "' is defined twice");
    spec.devices.push_back(std::move(device));
  }
  return spec;
}

CdiRegistry loadCdiSpecs(std::span<const std::string> dirs) {
  CdiRegistry registry;
  for (const auto& dir : dirs) {
    std::error_code ec;
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const auto name = entry.path().filename().string();
      if (name.ends_with(".json") || name.ends_with(".yaml") || name.ends_with(".yml")) files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      try {
        registry.specs.push_back(parseCdiSpec(readCheckedFile(file, 4u << 20, "CDI spec " + file), file));
      } catch (const Error& e) {
        registry.warnings.push_back(std::string("CDI spec skipped: ") + e.what());
      }
    }
  }
  return registry;
}

std::optional<unsigned> cdiGpuIndex(std::string_view name) {
  unsigned index = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (name.empty() || ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return index;
}

bool hasCdiKind(const CdiRegistry& registry, std::string_view kind) {
  return std::any_of(registry.specs.begin(), registry.specs.end(), [&](const CdiSpec& s) { return s.kind == kind; });
}

CdiSelection resolveCdiDevices(const CdiRegistry& registry, std::span<const std::string> names,
                               std::span<const std::string> searchedDirs) {
  CdiSelection selection;
  std::vector<const CdiSpec*> specsUsed;
  std::vector<std::pair<const CdiSpec*, const CdiDevice*>> chosen;
  for (const auto& qualified : names) {
    const auto eq = qualified.find('=');
    const std::string kind = qualified.substr(0, eq);
    const std::string name = eq == std::string::npos ? "" : qualified.substr(eq + 1);
    if (eq == std::string::npos || !std::regex_match(kind, kindPattern()) || !std::regex_match(name, deviceNamePattern()))
      throw Error("--device " + qualified + ": expected a CDI device name vendor.com/class=NAME (e.g. nvidia.com/gpu=all)");
    // The device of this kind and name from the highest-priority spec (the last one read).
    std::map<std::string, std::pair<const CdiSpec*, const CdiDevice*>> devicesOfKind;
    std::vector<std::string> order;
    for (const auto& spec : registry.specs) {
      if (spec.kind != kind) continue;
      for (const auto& device : spec.devices) {
        if (!devicesOfKind.contains(device.name)) order.push_back(device.name);
        devicesOfKind[device.name] = {&spec, &device};
      }
    }
    if (devicesOfKind.empty()) {
      std::string where;
      for (const auto& d : searchedDirs) where += (where.empty() ? "" : ", ") + d;
      throw Error("--device " + qualified + ": no CDI specification for '" + kind + "' in " + where);
    }
    std::vector<std::pair<const CdiSpec*, const CdiDevice*>> picked;
    if (name == "all" && !devicesOfKind.contains("all")) {
      for (const auto& n : order) picked.push_back(devicesOfKind[n]);
    } else if (auto it = devicesOfKind.find(name); it != devicesOfKind.end()) {
      picked.push_back(it->second);
    } else {
      std::string known;
      for (const auto& n : order) known += (known.empty() ? "" : ", ") + n;
      throw Error("--device " + qualified + ": no device '" + name + "' of kind " + kind + " (there are: " + known + ")");
    }
    for (const auto& p : picked) {
      if (std::find(chosen.begin(), chosen.end(), p) != chosen.end()) continue;
      chosen.push_back(p);
      selection.devices.push_back(kind + "=" + p.second->name);
      if (std::find(specsUsed.begin(), specsUsed.end(), p.first) == specsUsed.end()) specsUsed.push_back(p.first);
    }
  }
  for (const CdiSpec* spec : specsUsed) {
    selection.specFiles.push_back(spec->file);
    appendEdits(selection.edits, spec->edits, spec->file + " (for every " + spec->kind + " device)");
  }
  for (const auto& [spec, device] : chosen)
    appendEdits(selection.edits, device->edits,
                spec->file + (device->line ? ":" + std::to_string(device->line) : "") + " device " + device->name);
  return selection;
}

}  // namespace ctr::host
