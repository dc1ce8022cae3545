// Runs every line of shared/fixtures/sif/MANIFEST.tsv:
//   cli lines: run `ctr sif ...` and compare stdout byte for byte (stderr empty, exit 0);
//   lib lines: execute the recipe with the image module's SIF writer and compare the resulting file.
// Usage: ctr-sif-conformance FIXTURES_SIF_DIR CTR_BINARY
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/run_process.hpp"
#include "ctr/sif.hpp"

namespace sif = ctr::image::sif;
namespace fs = std::filesystem;

namespace {

// A recipe value: a bare word, a quoted string, a list, or a call `name(key=value, ...)`.
struct Value {
  std::string text;
  bool isList = false;
  bool isCall = false;
  std::vector<Value> items;                                // list items
  std::vector<std::pair<std::string, Value>> args;         // call arguments, in order

  [[nodiscard]] const Value* arg(const std::string& key) const {
    for (const auto& [k, v] : args) {
      if (k == key) return &v;
    }
    return nullptr;
  }
  [[nodiscard]] const Value& need(const std::string& key) const {
    if (const Value* v = arg(key)) return *v;
    throw ctr::Error("recipe: " + text + "(...) lacks " + key + "=");
  }
};

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Value value() {
    skipSpace();
    if (peek() == '"') return quoted();
    if (peek() == '[') {
      ++pos_;
      Value list;
      list.isList = true;
      skipSpace();
      if (peek() == ']') {
        ++pos_;
        return list;
      }
      for (;;) {
        list.items.push_back(value());
        skipSpace();
        char c = next();
        if (c == ']') return list;
        if (c != ',') fail("expected , or ]");
      }
    }
    Value v;
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != ')' && s_[pos_] != ']' && s_[pos_] != '(') {
      v.text += s_[pos_++];
    }
    while (!v.text.empty() && v.text.back() == ' ') v.text.pop_back();
    if (peek() == '(') {
      ++pos_;
      v.isCall = true;
      skipSpace();
      if (peek() == ')') {
        ++pos_;
        return v;
      }
      for (;;) {
        skipSpace();
        std::string key;
        while (pos_ < s_.size() && s_[pos_] != '=') key += s_[pos_++];
        if (next() != '=') fail("expected =");
        v.args.emplace_back(key, value());
        skipSpace();
        char c = next();
        if (c == ')') break;
        if (c != ',') fail("expected , or )");
      }
    }
    return v;
  }

  void skipSpace() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  [[nodiscard]] bool atEnd() const { return pos_ >= s_.size(); }
  [[nodiscard]] std::string_view rest() const { return s_.substr(pos_); }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  char next() { return pos_ < s_.size() ? s_[pos_++] : '\0'; }
  [[noreturn]] void fail(const std::string& what) const {
    throw ctr::Error("recipe parse error at column " + std::to_string(pos_) + ": " + what);
  }
  // A JSON string with the escapes the manifest uses.
  Value quoted() {
    ++pos_;
    Value v;
    for (;;) {
      char c = next();
      if (c == '\0') fail("unterminated string");
      if (c == '"') return v;
      if (c == '\\') {
        char e = next();
        v.text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        v.text += c;
      }
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

std::vector<std::uint8_t> readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw ctr::Error(p.string() + ": cannot open");
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::uint8_t> decodeData(const std::string& spec) {
  if (spec.starts_with("hex:")) {
    std::vector<std::uint8_t> out;
    for (std::size_t i = 4; i + 1 < spec.size(); i += 2) {
      out.push_back(static_cast<std::uint8_t>(std::stoul(spec.substr(i, 2), nullptr, 16)));
    }
    return out;
  }
  if (spec.starts_with("ascii:")) return {spec.begin() + 6, spec.end()};
  if (spec.starts_with("file:")) return readFile(spec.substr(5));
  throw ctr::Error("recipe: bad data " + spec);
}

std::int32_t lookup(const std::map<std::string, std::int32_t>& table, const std::string& key) {
  auto it = table.find(key);
  if (it == table.end()) throw ctr::Error("recipe: unknown value " + key);
  return it->second;
}

const std::map<std::string, std::int32_t> kDataTypes = {
    {"Deffile", 0x4001},   {"EnvVar", 0x4002},        {"Labels", 0x4003},
    {"Partition", 0x4004}, {"Signature", 0x4005},     {"GenericJSON", 0x4006},
    {"Generic", 0x4007},   {"CryptoMessage", 0x4008}, {"SBOM", 0x4009},
    {"OCIRootIndex", 0x400A}, {"OCIBlob", 0x400B}};
const std::map<std::string, std::int32_t> kFsTypes = {
    {"Squashfs", 1}, {"Ext3", 2}, {"ImmuObj", 3}, {"Raw", 4}, {"EncryptedSquashfs", 5}, {"GocryptfsSquashfs", 6}};
const std::map<std::string, std::int32_t> kPartTypes = {{"System", 1}, {"PrimSys", 2}, {"Data", 3}, {"Overlay", 4}};
const std::map<std::string, std::int32_t> kCryptoFormats = {{"OpenPGP", 1}, {"PEM", 2}};
const std::map<std::string, std::int32_t> kCryptoMessages = {{"ClearSignature", 0x100}, {"RSA-OAEP", 0x200}};
const std::map<std::string, std::int32_t> kSbomFormats = {
    {"cyclonedx-json", 1}, {"cyclonedx-xml", 2}, {"github-json", 3}, {"spdx-json", 4},
    {"spdx-rdf", 5},       {"spdx-tag-value", 6}, {"spdx-yaml", 7},  {"syft-json", 8}};

// Objects keep their data alive here while the writer reads it.
struct ObjectSet {
  std::vector<std::unique_ptr<std::vector<std::uint8_t>>> buffers;
  std::vector<sif::ObjectInput> inputs;

  void add(const Value& obj) {
    sif::ObjectInput in;
    in.type = static_cast<sif::DataType>(lookup(kDataTypes, obj.text));
    buffers.push_back(std::make_unique<std::vector<std::uint8_t>>(decodeData(obj.need("data").text)));
    in.data = sif::DataSource::fromBytes(*buffers.back());
    if (const Value* v = obj.arg("name")) in.name = v->text;
    in.group = static_cast<std::uint32_t>(std::stoul(obj.need("group").text));
    in.alignment = std::stoll(obj.need("align").text);
    if (in.type == sif::DataType::Partition) {
      in.partition = sif::PartitionInfo{static_cast<sif::FsType>(lookup(kFsTypes, obj.need("fs").text)),
                                        static_cast<sif::PartType>(lookup(kPartTypes, obj.need("part").text)),
                                        obj.need("arch").text};
    }
    if (in.type == sif::DataType::CryptoMessage) {
      in.cryptoFormat = lookup(kCryptoFormats, obj.need("format").text);
      in.cryptoMessage = lookup(kCryptoMessages, obj.need("message").text);
    }
    if (in.type == sif::DataType::Sbom) in.sbomFormat = lookup(kSbomFormats, obj.need("format").text);
    inputs.push_back(std::move(in));
  }
};

bool toBool(const Value& v) { return v.text == "true"; }
std::int64_t timeOf(const Value& step) { return std::stoll(step.need("time").text); }

void runStep(const Value& step, const fs::path& file) {
  if (step.text == "create") {
    sif::CreateOptions options;
    const std::string& uuid = step.need("uuid").text;
    if (uuid != "nil") options.id = sif::parseUuid(uuid);
    options.time = timeOf(step);
    options.capacity = std::stoll(step.need("capacity").text);
    if (const Value* l = step.arg("launch")) options.launchScript = l->text;
    ObjectSet objects;
    for (const auto& o : step.need("objects").items) objects.add(o);
    sif::createImage(file, options, objects.inputs);
    return;
  }
  auto image = sif::Image::open(file, true);
  sif::Editor editor(image);
  if (step.text == "add") {
    if (step.args.empty()) throw ctr::Error("recipe: add() without an object");
    ObjectSet objects;
    objects.add(step.args.front().second.isCall ? step.args.front().second : step.need("obj"));
    editor.add(objects.inputs.front(), timeOf(step));
  } else if (step.text == "delete") {
    sif::DeleteOptions options;
    if (const Value* v = step.arg("id")) options.id = static_cast<std::uint32_t>(std::stoul(v->text));
    if (const Value* v = step.arg("type")) options.type = static_cast<sif::DataType>(lookup(kDataTypes, v->text));
    if (const Value* v = step.arg("part")) options.partType = static_cast<sif::PartType>(lookup(kPartTypes, v->text));
    options.zero = toBool(step.need("zero"));
    options.compact = toBool(step.need("compact"));
    options.time = timeOf(step);
    editor.remove(options);
  } else if (step.text == "setprim") {
    editor.setPrimary(static_cast<std::uint32_t>(std::stoul(step.need("id").text)), timeOf(step));
  } else if (step.text == "set_metadata") {
    auto extra = decodeData(step.need("extra").text);
    editor.setMetadata(static_cast<std::uint32_t>(std::stoul(step.need("id").text)), extra, timeOf(step));
  } else if (step.text == "set_oci_blob_digest") {
    editor.setOciBlobDigest(static_cast<std::uint32_t>(std::stoul(step.need("id").text)),
                            step.need("digest").text, timeOf(step));
  } else {
    throw ctr::Error("recipe: unknown step " + step.text);
  }
}

// The first positional-looking argument of add(...) is written `add(Obj, time=T)`.
std::string normaliseAdd(std::string step) {
  if (step.starts_with("add(") && !step.starts_with("add(obj=")) step.insert(4, "obj=");
  return step;
}

std::vector<std::string> splitSteps(const std::string& recipe) {
  std::vector<std::string> steps;
  std::size_t start = 0;
  for (;;) {
    std::size_t p = recipe.find(" ; ", start);
    steps.push_back(recipe.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 3;
  }
  return steps;
}

std::string runLib(const std::string& recipe, const fs::path& expected, const fs::path& scratch) {
  const fs::path file = scratch / "image.sif";
  fs::remove(file);
  for (const std::string& raw : splitSteps(recipe)) {
    std::string stepText = normaliseAdd(raw);
    std::string expectError;
    if (auto p = stepText.find(" => error("); p != std::string::npos) {
      expectError = stepText.substr(p + 10, stepText.size() - p - 11);
      stepText.resize(p);
    }
    Parser parser(stepText);
    Value step = parser.value();
    parser.skipSpace();
    if (!parser.atEnd()) return "trailing text in step: " + std::string(parser.rest());
    if (expectError.empty()) {
      runStep(step, file);
      continue;
    }
    auto before = readFile(file);
    try {
      runStep(step, file);
      return "step " + step.text + " succeeded, expected error " + expectError;
    } catch (const ctr::Error&) {
    }
    if (readFile(file) != before) return "failed step " + step.text + " changed the file";
  }
  auto got = readFile(file);
  auto want = readFile(expected);
  if (got == want) return "";
  std::size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return "file differs at byte " + std::to_string(i) + " (got " + std::to_string(got.size()) +
         " bytes, expected " + std::to_string(want.size()) + ")";
}

std::string runCli(const std::string& command, const fs::path& expected, const std::string& ctr) {
  std::vector<std::string> argv{ctr};
  std::istringstream words(command);
  for (std::string w; words >> w;) argv.push_back(w);
  ctr::ProcessOptions options;
  options.captureStdout = true;
  options.captureStderr = true;
  auto result = ctr::runProcess(argv, options);
  if (!result.ok()) return result.describe() + ": " + result.capturedStderr;
  if (!result.capturedStderr.empty()) return "stderr not empty: " + result.capturedStderr;
  auto want = readFile(expected);
  if (std::string(want.begin(), want.end()) != result.capturedStdout) return "stdout differs";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " FIXTURES_SIF_DIR CTR_BINARY\n";
    return 2;
  }
  const std::string ctr = fs::absolute(argv[2]).string();
  fs::current_path(argv[1]);  // manifest paths are relative to it
  char scratchTemplate[] = "/tmp/ctr-sif-conformance.XXXXXX";
  if (::mkdtemp(scratchTemplate) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  const fs::path scratch = scratchTemplate;

  std::ifstream manifest("MANIFEST.tsv");
  std::string line;
  std::getline(manifest, line);  // header
  int pass = 0, fail = 0, lineNo = 1;
  while (std::getline(manifest, line)) {
    ++lineNo;
    if (line.empty()) continue;
    std::vector<std::string> cols;
    std::istringstream fields(line);
    for (std::string c; std::getline(fields, c, '\t');) cols.push_back(c);
    if (cols.size() != 4) {
      std::cout << "FAIL line " << lineNo << ": expected 4 columns\n";
      ++fail;
      continue;
    }
    std::string problem;
    try {
      problem = cols[0] == "cli"   ? runCli(cols[1], cols[3], ctr)
                : cols[0] == "lib" ? runLib(cols[1], cols[3], scratch)
                                   : "unknown kind " + cols[0];
    } catch (const std::exception& e) {
      problem = std::string("exception: ") + e.what();
    }
    if (problem.empty()) {
      ++pass;
      std::cout << "PASS line " << lineNo << ": " << cols[0] << " " << cols[3] << "\n";
    } else {
      ++fail;
      std::cout << "FAIL line " << lineNo << ": " << cols[0] << " " << cols[3] << ": " << problem << "\n";
    }
  }
  fs::remove_all(scratch);
  std::cout << "TOTAL " << pass + fail << " lines: " << pass << " passed, " << fail << " failed\n";
  return fail == 0 && pass > 0 ? 0 : 1;
}
