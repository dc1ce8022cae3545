#include "descriptor.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <regex>
#include <set>

#include "ctr/error.hpp"

namespace ctr::bench {

std::string profileName(Profile p) { return p == Profile::Quick ? "quick" : "full"; }

std::vector<std::string> splitOnBlanks(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = text.find_first_not_of(" \t", pos)) != std::string::npos) {
    size_t end = text.find_first_of(" \t", pos);
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

std::vector<std::string> Descriptor::argv(Profile p, bool imageSide) const {
  std::vector<std::string> out = imageSide && !imageCommand.empty() ? imageCommand : command;
  if (p == Profile::Quick && quickArgs) {
    out.resize(1);
    out.insert(out.end(), quickArgs->begin(), quickArgs->end());
  }
  return out;
}

std::string expand(const std::string& word, const Placeholders& p) {
  std::string out = word;
  for (const auto& [key, value] : {std::pair<std::string, const std::string&>{"{bindir}", p.bindir},
                                   {"{workdir}", p.workdir}, {"{datadir}", p.datadir}}) {
    for (size_t pos = 0; (pos = out.find(key, pos)) != std::string::npos; pos += value.size())
      out.replace(pos, key.size(), value);
  }
  return out;
}

std::vector<std::string> expand(const std::vector<std::string>& words, const Placeholders& p) {
  std::vector<std::string> out;
  for (const auto& w : words) out.push_back(expand(w, p));
  return out;
}

namespace {

// Every error names the file and the key, on one line.
struct Reader {
  std::string file;

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw Error(file + ": " + key + ": " + problem);
  }

  std::string scalar(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(key, "must be a string or number");
    return n.Scalar();
  }

  // A list of strings, or one string split on blanks (no shell quoting: use a list).
  std::vector<std::string> words(const YAML::Node& n, const std::string& key) const {
    std::vector<std::string> out;
    if (n.IsScalar()) return splitOnBlanks(n.Scalar());
    if (!n.IsSequence()) fail(key, "must be a list of strings or one string");
    for (size_t i = 0; i < n.size(); ++i) out.push_back(scalar(n[i], key + "[" + std::to_string(i) + "]"));
    return out;
  }

  double number(const YAML::Node& n, const std::string& key) const {
    std::string s = scalar(n, key);
    try {
      size_t used = 0;
      double v = std::stod(s, &used);
      if (used != s.size()) throw std::invalid_argument(s);
      return v;
    } catch (const std::exception&) {
      fail(key, "'" + s + "' is not a number");
    }
  }

  int positiveInt(const YAML::Node& n, const std::string& key) const {
    double v = number(n, key);
    if (v < 1 || v != static_cast<int>(v)) fail(key, "must be a whole number >= 1");
    return static_cast<int>(v);
  }

  bool boolean(const YAML::Node& n, const std::string& key) const {
    std::string s = scalar(n, key);
    if (s == "true" || s == "yes") return true;
    if (s == "false" || s == "no") return false;
    fail(key, "must be true or false, not '" + s + "'");
  }

  Direction direction(const YAML::Node& n, const std::string& key) const {
    std::string s = scalar(n, key);
    if (s == "higher") return Direction::Higher;
    if (s == "lower") return Direction::Lower;
    fail(key, "must be 'higher' (rates) or 'lower' (times), not '" + s + "'");
  }

  double delta(const YAML::Node& n, const std::string& key) const {
    double d = number(n, key);
    if (!(d > 0 && d < 1)) fail(key, "must be a fraction between 0 and 1 (0.02 = 2%)");
    return d;
  }

  // {quick: N, full: N} or one N for both.
  std::map<Profile, int> perProfileInt(const YAML::Node& n, const std::string& key) const {
    std::map<Profile, int> out;
    if (n.IsScalar()) {
      int v = positiveInt(n, key);
      return {{Profile::Quick, v}, {Profile::Full, v}};
    }
    if (!n.IsMap()) fail(key, "must be a number or {quick: N, full: N}");
    for (const auto& kv : n) {
      std::string p = kv.first.Scalar();
      if (p != "quick" && p != "full") fail(key + "." + p, "unknown profile (quick, full)");
      out[p == "quick" ? Profile::Quick : Profile::Full] = positiveInt(kv.second, key + "." + p);
    }
    return out;
  }

  void onlyKeys(const YAML::Node& map, const std::string& where, const std::set<std::string>& known) const {
    for (const auto& kv : map) {
      std::string k = kv.first.Scalar();
      if (!known.contains(k)) {
        std::string list;
        for (const auto& name : known) list += (list.empty() ? "" : ", ") + name;
        fail(where.empty() ? k : where + "." + k, "unknown key (known: " + list + ")");
      }
    }
  }
};

}  // namespace

Descriptor loadDescriptor(const std::filesystem::path& file) {
  Reader r{file.string()};
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::BadFile&) {
    throw Error(file.string() + ": cannot read the file");
  } catch (const YAML::Exception& e) {
    throw Error(file.string() + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) r.fail("(top level)", "must be a mapping of keys");
  r.onlyKeys(root, "", {"name", "description", "command", "quick_args", "image_command", "profiles",
                        "launcher", "ranks", "mpirun_args", "env", "requires", "requires_root",
                        "setup", "quick_setup", "teardown", "binds", "container_args", "compare_source", "timeout_s",
                        "blocks", "max_blocks", "output", "output_files", "foms"});
  Descriptor d;
  d.file = file;
  if (!root["name"]) r.fail("name", "missing");
  d.name = r.scalar(root["name"], "name");
  static const std::regex nameRe("[A-Za-z0-9][A-Za-z0-9._-]*");
  if (!std::regex_match(d.name, nameRe)) r.fail("name", "'" + d.name + "' may hold only letters, digits, '.', '_', '-'");
  if (root["description"]) d.description = r.scalar(root["description"], "description");
  if (!root["command"]) r.fail("command", "missing");
  d.command = r.words(root["command"], "command");
  if (d.command.empty()) r.fail("command", "is empty");
  if (root["quick_args"]) d.quickArgs = r.words(root["quick_args"], "quick_args");
  if (root["image_command"]) d.imageCommand = r.words(root["image_command"], "image_command");
  if (root["profiles"]) {
    d.profiles.clear();
    for (const auto& p : r.words(root["profiles"], "profiles")) {
      if (p != "quick" && p != "full") r.fail("profiles", "unknown profile '" + p + "' (quick, full)");
      d.profiles.push_back(p == "quick" ? Profile::Quick : Profile::Full);
    }
  }
  if (root["launcher"]) {
    std::string l = r.scalar(root["launcher"], "launcher");
    if (l != "mpirun" && l != "direct") r.fail("launcher", "must be 'direct' or 'mpirun', not '" + l + "'");
    d.mpirun = l == "mpirun";
  }
  if (root["ranks"]) {
    d.ranks = r.positiveInt(root["ranks"], "ranks");
    if (!d.mpirun && d.ranks != 1) r.fail("ranks", "needs 'launcher: mpirun'");
  }
  if (root["mpirun_args"]) d.mpirunArgs = r.words(root["mpirun_args"], "mpirun_args");
  if (auto e = root["env"]) {
    if (!e.IsMap()) r.fail("env", "must be a mapping NAME: value");
    static const std::regex envRe("[A-Za-z_][A-Za-z0-9_]*");
    for (const auto& kv : e) {
      std::string k = kv.first.Scalar();
      if (!std::regex_match(k, envRe)) r.fail("env." + k, "not a valid variable name");
      d.env[k] = r.scalar(kv.second, "env." + k);
    }
  }
  if (root["requires"]) d.requiredPrograms = r.words(root["requires"], "requires");
  if (root["requires_root"]) d.requiresRoot = r.boolean(root["requires_root"], "requires_root");
  // setup/teardown: a command (list), or shell text run with sh -c.
  for (auto [key, target] : {std::pair<const char*, std::vector<std::string>*>{"setup", &d.setup}, {"teardown", &d.teardown}}) {
    if (!root[key]) continue;
    if (root[key].IsScalar()) *target = {"/bin/sh", "-c", root[key].Scalar()};
    else *target = r.words(root[key], key);
    if (target->empty()) r.fail(key, "is empty");
  }
  if (auto q = root["quick_setup"]) {
    d.quickSetup = q.IsScalar() ? std::vector<std::string>{"/bin/sh", "-c", q.Scalar()} : r.words(q, "quick_setup");
    if (d.quickSetup->empty()) r.fail("quick_setup", "is empty");
  }
  if (root["binds"]) d.binds = r.words(root["binds"], "binds");
  for (const auto& b : d.binds)
    if (b.empty() || b[0] != '/') r.fail("binds", "'" + b + "' is not an absolute path");
  if (root["container_args"]) {
    d.containerArgs = r.words(root["container_args"], "container_args");
    // Options only: the image and the command are ctr-bench's to place.
    if (d.containerArgs.empty()) r.fail("container_args", "is empty");
    if (!d.containerArgs[0].starts_with("-"))
      r.fail("container_args", "'" + d.containerArgs[0] + "' is not an option of ctr exec (they start with '-')");
    for (const auto& w : d.containerArgs)
      if (w == "--") r.fail("container_args", "'--' would end ctr exec's options");
  }
  if (root["compare_source"]) {
    d.compareSource = r.scalar(root["compare_source"], "compare_source");
    if (!std::regex_match(d.compareSource, nameRe))
      r.fail("compare_source", "'" + d.compareSource + "' is not a workload name");
    if (d.compareSource == d.name) r.fail("compare_source", "names the workload itself");
  }
  if (root["timeout_s"]) {
    d.timeoutS = r.number(root["timeout_s"], "timeout_s");
    if (d.timeoutS <= 0) r.fail("timeout_s", "must be > 0 seconds");
  }
  if (root["blocks"]) d.blocks = r.perProfileInt(root["blocks"], "blocks");
  if (root["max_blocks"]) d.maxBlocks = r.perProfileInt(root["max_blocks"], "max_blocks");
  if (root["output"]) {
    std::string o = r.scalar(root["output"], "output");
    if (o != "json" && o != "regex") r.fail("output", "must be 'json' (the suite's contract) or 'regex', not '" + o + "'");
    d.regexOutput = o == "regex";
  }
  if (root["output_files"]) {
    d.outputFiles = r.words(root["output_files"], "output_files");
    if (!d.regexOutput) r.fail("output_files", "needs 'output: regex' (the files are searched with the FOMs' regexes)");
    for (const auto& f : d.outputFiles)
      if (f.empty() || (f[0] != '/' && !f.starts_with("{workdir}") && !f.starts_with("{datadir}")))
        r.fail("output_files", "'" + f + "' is not an absolute path (or one under {workdir})");
  }
  if (auto f = root["foms"]) {
    if (!f.IsSequence()) r.fail("foms", "must be a list");
    for (size_t i = 0; i < f.size(); ++i) {
      std::string where = "foms[" + std::to_string(i) + "]";
      const auto& n = f[i];
      if (!n.IsMap()) r.fail(where, "must be a mapping {name, regex, unit, direction, delta}");
      r.onlyKeys(n, where, {"name", "regex", "unit", "direction", "delta"});
      FomSpec s;
      if (!n["name"]) r.fail(where + ".name", "missing");
      s.name = r.scalar(n["name"], where + ".name");
      if (n["regex"]) {
        s.regex = r.scalar(n["regex"], where + ".regex");
        try {
          std::regex re(s.regex, std::regex::ECMAScript);
          if (re.mark_count() < 1) r.fail(where + ".regex", "needs a capture group ( ) around the value");
        } catch (const std::regex_error& e) {
          r.fail(where + ".regex", std::string("not a valid regular expression: ") + e.what());
        }
      }
      if (n["unit"]) s.unit = r.scalar(n["unit"], where + ".unit");
      if (n["direction"]) s.direction = r.direction(n["direction"], where + ".direction");
      if (n["delta"]) s.delta = r.delta(n["delta"], where + ".delta");
      if (d.regexOutput) {
        if (s.regex.empty()) r.fail(where + ".regex", "missing (output: regex)");
        if (!s.direction) r.fail(where + ".direction", "missing (output: regex)");
        if (!s.delta) r.fail(where + ".delta", "missing (output: regex)");
      }
      d.foms.push_back(std::move(s));
    }
  }
  if (d.regexOutput && d.foms.empty()) r.fail("foms", "missing: output: regex needs at least one FOM");
  return d;
}

std::vector<Descriptor> loadDescriptorDir(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    auto ext = entry.path().extension();
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml")) files.push_back(entry.path());
  }
  if (ec) throw Error(dir.string() + ": cannot list the workload directory: " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<Descriptor> out;
  for (const auto& f : files) out.push_back(loadDescriptor(f));
  return out;
}

}  // namespace ctr::bench
