// helper-config-agreement: the two ctr.conf parsers, ctr's (src/config/policy.cpp) and the
// setuid helper's (helper_parse.c), must agree on which files are valid, or a file ctr
// accepts could mean something else to the helper (a misspelt 'setuid image directories'
// that ctr refuses but the helper skipped meant "anywhere"). A test program, never
// installed; tests/integration/test_hardening_helper_config.sh runs it.
//
//   helper-config-agreement SHIPPED_CONF [INPUTS]
//
// ctr's keys are config::knownKeys() (its setter table), SHIPPED_CONF (etc/ctr.conf) examples of
// their values. INPUTS files (default 23000) are made from those lines, mutated keys and
// values, comments and broken lines, by a seeded generator ($CTR_AGREEMENT_SEED). For each:
//  - what ctr accepts, the helper accepts;
//  - the helper's verdict is ctr's on the same file less the lines of keys only ctr reads
//    (whose values the helper leaves to ctr): unknown keys and lines without '=' are refused
//    by both, and the helper's keys' values are judged alike;
//  - where both accept, the helper's keys have the same values in both.
// Outside this: the helper reads at most 64 KiB, 32 entries per list and no NUL byte (it is
// C and reads the file into one buffer); the generator stays inside those limits.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/strings.hpp"

extern "C" {
#include "helper_parse.h"
}

namespace {

// The keys the helper reads itself; the others it only has to know.
const std::set<std::string, std::less<>> kHelperKeys{"allow setuid",        "setuid image directories",
                                                      "setuid image owners", "setuid formats",
                                                      "max loop devices",    "max loop devices total"};

std::string readFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "helper-config-agreement: cannot read %s\n", path);
    std::exit(2);
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}


struct HelperResult {
  bool ok = false;
  std::string error;
  hp_config cfg{};
  std::string text;  // cfg's strings point into it
};

HelperResult helperParse(const std::string& text) {
  HelperResult r;
  r.text = text;
  char err[HP_ERR_LEN] = "";
  r.ok = hp_parse_config(r.text.data(), r.text.size(), &r.cfg, err, sizeof err) == 0;
  r.error = err;
  return r;
}

struct CtrResult {
  bool ok = false;
  std::string error;
  ctr::config::Policy policy;
};

CtrResult ctrParse(const std::string& text) {
  CtrResult r;
  try {
    r.policy = ctr::config::parsePolicy(text, "f");
    r.ok = true;
  } catch (const ctr::Error& e) {
    r.error = e.what();
  }
  return r;
}

// `text` less the lines whose key ctr knows and the helper only skips.
std::string withoutCtrOnlyKeys(const std::string& text, const std::set<std::string, std::less<>>& ctrOnly) {
  std::string out;
  for (const ctr::ConfigLine& line : ctr::configLines(text)) {
    if (line.hasEquals && ctrOnly.count(line.key) != 0) continue;
    out.append(line.text).push_back('\n');
  }
  return out;
}

std::vector<std::string> list(const char* const* items, int n) { return {items, items + n}; }

// Where both accept: the helper's keys mean the same to both.
std::string sameValues(const hp_config& h, const ctr::config::Policy& p) {
  if ((h.allow_setuid != 0) != p.allowSetuid) return "allow setuid";
  if (list(h.dirs, h.n_dirs) != p.setuidImageDirectories) return "setuid image directories";
  if (list(h.owners, h.n_owners) != p.setuidImageOwners) return "setuid image owners";
  int formats = 0;
  for (const auto& f : p.setuidFormats) formats |= f == "sif" ? HP_FORMAT_SIF : HP_FORMAT_SQUASHFS;
  if (h.formats != formats) return "setuid formats";
  if (h.max_loop_devices != p.maxLoopDevices) return "max loop devices";
  if (h.max_loop_devices_total != p.maxLoopDevicesTotal) return "max loop devices total";
  return {};
}

// Whether a rule of ctr's may refuse an image: when the helper must ask ctr's own check
// (`ctr __verify-fd`). Where ctr refuses the file, the helper asks whenever a rule's last
// word is not "off", and the check fails closed on the file ctr refuses.
bool mayRefuse(const ctr::config::Policy& p) {
  for (const auto& r : p.execution.rules)
    if (r.mode != ctr::config::ExecutionMode::Off) return true;
  return false;
}

std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n\n    ";
    else if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else out += static_cast<char>(c);
  }
  return out;
}

// Input lines: the shipped file's own lines (its commented-out examples too), each key
// with values from a pool, keys misspelt, comments, blank and broken lines.
class Generator {
 public:
  Generator(const std::vector<std::string>& keys, const std::string& shipped, unsigned seed) : keys_(keys), rng_(seed) {
    for (const auto& raw : ctr::splitLines(shipped)) {
      std::string_view line = ctr::trim(raw);
      if (line.starts_with("#")) line = ctr::trim(line.substr(1));
      if (line.find(" = ") != std::string_view::npos) examples_.emplace_back(line);
    }
  }

  std::string next() {
    std::string text;
    const int lines = pick(9);
    for (int i = 0; i < lines; i++) text += line() + (pick(12) == 0 ? "\r\n" : "\n");
    if (pick(6) == 0 && !text.empty()) text.pop_back();  // no final newline
    return text;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  template <class T>
  const T& any(const std::vector<T>& v) {
    return v[static_cast<size_t>(pick(static_cast<int>(v.size())))];
  }

  std::string key() {
    std::string k = any(keys_);
    if (pick(3) != 0) return k;
    // A typo: what a misspelt key looks like.
    const size_t at = static_cast<size_t>(pick(static_cast<int>(k.size())));
    switch (pick(7)) {
      case 0: k.erase(at, 1); break;
      case 1: k.insert(at, 1, k[at]); break;
      case 2: if (at + 1 < k.size()) std::swap(k[at], k[at + 1]); break;
      case 3: k[at] = static_cast<char>(std::toupper(static_cast<unsigned char>(k[at]))); break;
      case 4: k.insert(at, " "); break;
      case 5: k += "s"; break;
      default: k = k.substr(0, at); break;
    }
    return k;
  }

  std::string value() {
    static const std::vector<std::string> pool{
        "yes", "no", "true", "false", "1", "0", "maybe", "YES", "", " ", "sif", "squashfs", "sif, squashfs",
        "squashfs,sif,", "ext3", "sif, ext3", ",", "/images", "/a, /b", "/a,,/b", "relative", "/a, b", "root",
        "root, self", "self", "alice, bob", "64", "1048576", "1048577", "+5", "-1", "05", "5x", "0x10", " 7",
        "\v5", "\f9", "99999999999999999999999", "2147483648", "1e3", "auto", "16G", "%u", "/var/tmp/ctr-%u",
        "a=b", "# only a comment", "x # comment", "\t", "/scratch, /apps/images # two", "whitelist", "off",
        "/a off", "/a\twhitestrict", "/a b blacklist", "/apps/x\toff", "/b whitelist # a rule"};
    return any(pool);
  }

  std::string line() {
    switch (pick(10)) {
      case 0: return any(examples_);
      case 1: return "# " + any(examples_);
      case 2: return pick(2) ? "" : "   \t";
      case 3: return pick(2) ? key() : "= " + value();  // no '=', or no key
      case 4: return any(examples_) + " # trailing";
      default: {
        const char* eq = pick(4) == 0 ? "=" : " = ";
        return (pick(8) == 0 ? "  " : "") + key() + eq + value();
      }
    }
  }

  std::vector<std::string> keys_;
  std::vector<std::string> examples_;
  std::mt19937 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: helper-config-agreement SHIPPED_CONF [INPUTS]\n");
    return 2;
  }
  const std::vector<std::string> keys = ctr::config::knownKeys();
  const std::string shipped = readFile(argv[1]);
  const long inputs = argc > 2 ? std::atol(argv[2]) : 23000;
  const char* seedEnv = std::getenv("CTR_AGREEMENT_SEED");
  const unsigned seed = seedEnv ? static_cast<unsigned>(std::strtoul(seedEnv, nullptr, 10)) : 51;
  std::set<std::string, std::less<>> ctrOnly;
  for (const auto& k : keys)
    if (kHelperKeys.count(k) == 0) ctrOnly.insert(k);

  // The helper's list of ctr's keys is ctr's list: none ctr dropped, none it added. It is
  // written from ctr's table at build time (src/helper/config_keys.cpp); this checks the
  // writing, and the build that included it.
  std::set<std::string, std::less<>> helperKnows;
  for (const char* const* k = hp_ctr_keys; *k != nullptr; k++) helperKnows.insert(*k);
  const std::set<std::string, std::less<>> ctrKnows(keys.begin(), keys.end());
  int failures = 0;
  for (const auto& k : ctrKnows) {
    if (helperKnows.count(k) != 0) continue;
    std::printf("DISAGREE: ctr knows the key '%s', the helper's hp_ctr_keys does not\n", k.c_str());
    failures++;
  }
  for (const auto& k : helperKnows) {
    if (ctrKnows.count(k) != 0) continue;
    std::printf("DISAGREE: the helper's hp_ctr_keys has '%s', which ctr does not know\n", k.c_str());
    failures++;
  }
  auto failed = [&](const std::string& what, const std::string& text, const HelperResult& h, const CtrResult& c) {
    if (++failures > 5) return;
    std::printf("DISAGREE: %s\n  input:\n    %s\n  helper: %s\n  ctr:    %s\n", what.c_str(), escaped(text).c_str(),
                h.ok ? "accepts" : h.error.c_str(), c.ok ? "accepts" : c.error.c_str());
  };
  auto check = [&](const std::string& text) {
    const HelperResult h = helperParse(text);
    const CtrResult c = ctrParse(text);
    const CtrResult cf = ctrParse(withoutCtrOnlyKeys(text, ctrOnly));
    if (c.ok && !h.ok) return failed("ctr accepts, the helper refuses", text, h, c);
    if (h.ok != cf.ok)
      return failed(h.ok ? "the helper accepts what ctr refuses (not a value of a key only ctr reads)"
                         : "the helper refuses what ctr accepts",
                    text, h, cf);
    if (h.ok) {
      if (const std::string key = sameValues(h.cfg, cf.policy); !key.empty())
        return failed("'" + key + "' differs", text, h, cf);
    }
    if (h.ok && c.ok && (h.cfg.execution_control != 0) != mayRefuse(c.policy))
      return failed("whether an 'execution rule' may refuse (the helper then asks ctr's check)", text, h, c);
  };

  // Each of ctr's keys, with a value or without: never an unknown key to the helper.
  for (const auto& k : keys) check(k + " = \n");
  check(shipped);
  check("allow setuid = yes\n" + shipped);
  Generator gen(keys, shipped, seed);
  for (long i = 0; i < inputs; i++) check(gen.next());

  const long total = inputs + 2 + static_cast<long>(keys.size());
  if (failures > 0) {
    std::printf("helper-config-agreement: %d disagreements in %ld inputs (seed %u)\n", failures, total, seed);
    return 1;
  }
  std::printf("helper-config-agreement: the two parsers agree on %ld inputs (%zu keys, seed %u)\n", total,
              keys.size(), seed);
  return 0;
}
