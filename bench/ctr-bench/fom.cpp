#include "fom.hpp"

#include <algorithm>
#include <regex>

namespace ctr::bench {

namespace {

const FomSpec* specFor(const Descriptor& d, const std::string& name) {
  for (const auto& s : d.foms)
    if (s.name == name) return &s;
  return nullptr;
}

void applyOverrides(const Descriptor& d, FomValue& f, const std::map<std::string, double>& overrides) {
  if (const FomSpec* s = specFor(d, f.name)) {
    if (s->delta) f.delta = *s->delta;
    if (s->direction) f.direction = *s->direction;
    if (!s->unit.empty()) f.unit = s->unit;
  }
  if (auto it = overrides.find(d.name + "/" + f.name); it != overrides.end()) {
    f.delta = it->second;
  } else if (auto it2 = overrides.find(f.name); it2 != overrides.end()) {
    f.delta = it2->second;
  }
}

std::optional<double> toNumber(const std::string& s) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used == 0) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

ParsedOutput parseJson(const std::string& out) {
  ParsedOutput p;
  static const std::string marker = "{\"workload\":";
  std::string line;
  for (size_t pos = 0; pos < out.size();) {
    size_t nl = out.find('\n', pos);
    if (nl == std::string::npos) nl = out.size();
    std::string_view l(out.data() + pos, nl - pos);
    if (l.starts_with(marker)) line = std::string(l);
    pos = nl + 1;
  }
  if (line.empty()) {
    p.error = "no result line ({\"workload\": ...) on stdout";
    return p;
  }
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    p.error = "the result line is not valid JSON";
    return p;
  }
  if (!j.contains("foms") || !j["foms"].is_array()) {
    p.error = "the result line has no \"foms\" list";
    return p;
  }
  if (j.contains("info")) p.info = j["info"];
  for (const auto& f : j["foms"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
    FomValue v;
    v.name = f["name"];
    if (f.contains("value") && f["value"].is_number()) v.value = f["value"].get<double>();
    if (f.contains("unit") && f["unit"].is_string()) v.unit = f["unit"];
    v.direction = f.value("direction", std::string("higher")) == "lower" ? Direction::Lower : Direction::Higher;
    v.delta = f.contains("delta") && f["delta"].is_number() ? f["delta"].get<double>() : kDefaultDelta;
    p.foms.push_back(std::move(v));
  }
  if (p.foms.empty()) p.error = "the result line lists no FOM";
  return p;
}

ParsedOutput parseRegex(const Descriptor& d, const std::string& out, const std::string& err,
                        const std::vector<std::string>& files) {
  std::vector<const std::string*> texts{&out, &err};
  for (const auto& f : files) texts.push_back(&f);
  ParsedOutput p;
  for (const auto& s : d.foms) {
    FomValue v;
    v.name = s.name;
    v.unit = s.unit;
    std::regex re(s.regex, std::regex::ECMAScript);
    // The last match wins (applications print their final figures last); stdout first, then
    // stderr, then the output files in their order.
    for (const std::string* text : texts) {
      std::optional<double> found;
      for (auto it = std::sregex_iterator(text->begin(), text->end(), re); it != std::sregex_iterator(); ++it)
        if (auto n = toNumber((*it)[1].str())) found = n;
      if (found) {
        v.value = found;
        break;
      }
    }
    p.foms.push_back(std::move(v));
  }
  if (std::none_of(p.foms.begin(), p.foms.end(), [](const FomValue& f) { return f.value.has_value(); }))
    p.error = "no FOM regex matched the output";
  return p;
}

}  // namespace

ParsedOutput parseOutput(const Descriptor& d, const std::string& out, const std::string& err,
                         const std::map<std::string, double>& deltaOverrides, const std::vector<std::string>& files) {
  ParsedOutput p = d.regexOutput ? parseRegex(d, out, err, files) : parseJson(out);
  for (auto& f : p.foms) applyOverrides(d, f, deltaOverrides);
  return p;
}

}  // namespace ctr::bench
