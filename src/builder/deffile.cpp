// The Apptainer definition-file parser: stages split at `Bootstrap:` lines, {{ name }}
// templating per stage, then each stage's header and sections. See deffile.hpp for where
// ctr departs from Apptainer and why.
#include "ctr/deffile.hpp"

#include <cstdio>
#include <algorithm>
#include <cctype>
#include <set>
#include <span>

#include "ctr/error.hpp"
#include "ctr/strings.hpp"

namespace ctr::builder::deffile {
namespace {

constexpr std::string_view kBlanks = " \t";
// Templating can repeat a long value many times; a real definition is a few KiB.
constexpr size_t kMaxTemplatedSize = 16u << 20;

// Apptainer's header keywords (validHeaders); "otherurl" takes a number ("OtherURL0").
// Spelled as its documentation spells them, for the error message.
constexpr std::string_view kHeaderKeywords[] = {
    "Bootstrap",   "From",    "IncludeCmd",  "MirrorURL",    "UpdateURL",
    "OSVersion",   "Include", "Library",     "Registry",     "Namespace",
    "Stage",       "Product", "User",        "Regcode",      "ProductPGP",
    "RegisterURL", "Modules", "OtherURL<N>", "Fingerprints", "ConfURL",
    "Setopt",      "Target",  "Frontend",    "Filename",     "BuildArgs"};

constexpr std::string_view kScriptSections[] = {
    "arguments", "pre",         "setup", "files",  "post", "environment",
    "runscript", "startscript", "test",  "labels", "help"};
constexpr std::string_view kAppSections[] = {"appinstall", "appfiles", "appenv",  "apprun",
                                             "applabels",  "apphelp",  "apptest", "appstart"};

std::string lowerCase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Blanks as Go's unicode.IsSpace counts them in ASCII (Apptainer's ScanWords and \s).
bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool isWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// `s` up to its first '#'.
std::string_view beforeComment(std::string_view s) { return s.substr(0, s.find('#')); }

std::vector<std::string_view> splitWords(std::string_view s) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while ((pos = s.find_first_not_of(kBlanks, pos)) != std::string_view::npos) {
    size_t end = s.find_first_of(kBlanks, pos);
    if (end == std::string_view::npos) end = s.size();
    words.push_back(s.substr(pos, end - pos));
    pos = end;
  }
  return words;
}

std::string joinNames(std::string_view prefix, std::span<const std::string_view> names) {
  std::string out;
  for (auto n : names) {
    if (!out.empty()) out += ", ";
    out += prefix;
    out += n;
  }
  return out;
}

// A line of a stage: its text without the line end (Apptainer's ScanLines drops one CR),
// and its number in the file as written, before templating.
struct Line {
  std::string_view text;
  int number = 0;
};

// A section as written: %NAME ARGS on `line`, then its body.
struct SectionText {
  std::string name;
  std::string_view args;
  int line = 0;
  std::string_view body;
  std::span<const Line> bodyLines;
};

// A section line is one whose first word starts with '%' (Apptainer's scanner). Returns
// false for other lines; otherwise the lower-case name and the trimmed rest.
bool splitSectionLine(std::string_view text, std::string& name, std::string_view& args) {
  size_t start = 0;
  while (start < text.size() && isSpace(text[start])) ++start;
  if (start == text.size() || text[start] != '%') return false;
  std::string_view rest = text.substr(start);
  rest.remove_prefix(std::min(rest.find_first_not_of('%'), rest.size()));
  size_t end = std::min(rest.find_first_of(kBlanks), rest.size());
  name = lowerCase(rest.substr(0, end));
  args = trim(rest.substr(end));
  return true;
}

bool isSectionLine(std::string_view text) {
  std::string name;
  std::string_view args;
  return splitSectionLine(text, name, args);
}

// Splits `text` (starting at file line `firstLine`) into lines; `origin`, when given, maps
// each line index to its file line (templating can move lines).
std::vector<Line> splitLines(std::string_view text, int firstLine,
                             const std::vector<int>* origin = nullptr) {
  std::vector<Line> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    int index = static_cast<int>(lines.size());
    int number = origin ? (*origin)[static_cast<size_t>(index)] : firstLine + index;
    lines.push_back({line, number});
    pos = nl + 1;
  }
  return lines;
}

class Parser {
 public:
  Parser(std::string_view fileName, const std::map<std::string, std::string>& buildArgs)
      : fileName_(fileName), buildArgs_(buildArgs) {}

  DefinitionFile parse(std::string_view text);

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(std::string(fileName_) + ":" + std::to_string(line) + ": " + what);
  }
  void warn(int line, const std::string& what) {
    result_.warnings.push_back(std::string(fileName_) + ":" + std::to_string(line) + ": " + what);
  }

  std::map<std::string, std::string> readDefaults(const std::vector<Line>& lines);
  std::string templated(std::string_view raw, int firstLine,
                        const std::map<std::string, std::string>& defaults,
                        std::vector<int>& origin);
  std::string nestedValue(const std::string& value,
                          const std::map<std::string, std::string>& defaults, int line);
  void checkTemplatedSize(size_t size, int line) const {
    if (size > kMaxTemplatedSize)
      fail(line, "the definition grows past " + std::to_string(kMaxTemplatedSize >> 20) +
                     " MiB when templated");
  }
  Definition parseStage(const std::vector<Line>& lines, int firstLine);
  void parseHeader(std::span<const Line> lines, Definition& def);
  void addHeaderField(Definition& def, std::string_view spelling, std::string value, int line);
  void addSection(Definition& def, const SectionText& text);
  void addAppSection(Definition& def, const SectionText& text);
  void addFilesSection(Definition& def, const SectionText& text);
  void addScriptSection(Definition& def, const SectionText& text);
  void appendTo(Section& section, std::string_view args, int line, std::string_view body);
  std::vector<FileEntry> parseFileEntries(std::span<const Line> lines, std::string_view what);
  static void parseLabels(std::span<const Line> lines, std::vector<Label>& labels);

  std::string_view fileName_;
  const std::map<std::string, std::string>& buildArgs_;
  std::set<std::string> usedBuildArgs_;
  DefinitionFile result_;
};

// The default values of a stage's %arguments sections, read before templating as
// Apptainer does (so a default can itself hold a {{ name }}).
std::map<std::string, std::string> Parser::readDefaults(const std::vector<Line>& lines) {
  std::map<std::string, std::string> defaults;
  bool inArguments = false;
  for (const auto& line : lines) {
    std::string name;
    std::string_view args;
    if (splitSectionLine(line.text, name, args)) {
      inArguments = name == "arguments";
      continue;
    }
    if (!inArguments) continue;
    std::string_view t = trim(line.text);
    if (t.empty() || t.front() == '#') continue;
    size_t eq = t.find('=');
    if (eq == std::string_view::npos) {
      warn(line.number, "%arguments line '" + std::string(t) + "' is not NAME=VALUE; skipped");
      continue;
    }
    std::string key(trim(t.substr(0, eq)));
    if (key.empty()) {
      warn(line.number, "%arguments line '" + std::string(t) + "' has no name; skipped");
      continue;
    }
    defaults[key] = std::string(trim(t.substr(eq + 1)));
  }
  return defaults;
}

// A {{ name }} at `pos` (Go's `{{\s*(\w+)\s*}}`): its end and the name, or npos.
size_t matchPlaceholder(std::string_view s, size_t pos, std::string_view& name) {
  if (s.compare(pos, 2, "{{") != 0) return std::string_view::npos;
  size_t p = pos + 2;
  while (p < s.size() && isSpace(s[p])) ++p;
  size_t nameStart = p;
  while (p < s.size() && isWordChar(s[p])) ++p;
  if (p == nameStart) return std::string_view::npos;
  name = s.substr(nameStart, p - nameStart);
  while (p < s.size() && isSpace(s[p])) ++p;
  if (s.compare(p, 2, "}}") != 0) return std::string_view::npos;
  return p + 2;
}

// One level of {{ name }} inside a default value is replaced when the name is known;
// an unknown one stays as written (Apptainer).
std::string Parser::nestedValue(const std::string& value,
                                const std::map<std::string, std::string>& defaults, int line) {
  std::string out;
  for (size_t pos = 0; pos < value.size();) {
    std::string_view name;
    size_t end = matchPlaceholder(value, pos, name);
    if (end == std::string_view::npos) {
      out += value[pos++];
      continue;
    }
    std::string key(name);
    if (auto it = buildArgs_.find(key); it != buildArgs_.end()) {
      out += it->second;
      usedBuildArgs_.insert(key);
    } else if (auto d = defaults.find(key); d != defaults.end()) {
      out += d->second;
    } else {
      out.append(value, pos, end - pos);
    }
    checkTemplatedSize(out.size(), line);
    pos = end;
  }
  return out;
}

// Replaces each {{ name }} of the stage text by its --build-arg or %arguments value.
// A placeholder after a '#' that is not "#!" on its line is a comment and stays as
// written (Apptainer's test). `origin` receives the file line of each output line.
std::string Parser::templated(std::string_view raw, int firstLine,
                              const std::map<std::string, std::string>& defaults,
                              std::vector<int>& origin) {
  std::string out;
  out.reserve(raw.size());
  origin.assign(1, firstLine);
  int sourceLine = firstLine;
  size_t copied = 0;  // raw[0, copied) is in `out` or consumed
  auto copySource = [&](size_t to) {
    for (size_t i = copied; i < to; ++i) {
      out += raw[i];
      if (raw[i] == '\n') origin.push_back(++sourceLine);
    }
    copied = to;
  };
  // Whether the text from the line start (or the last substitution) up to `scanned` holds a
  // '#' followed by something other than '!', kept up to date in one pass over the text.
  size_t scanned = 0, regionStart = 0;
  bool commentSeen = false;
  auto scanTo = [&](size_t to) {
    for (size_t k = scanned; k < to; ++k) {
      if (raw[k] == '\n') {
        regionStart = k;
        commentSeen = false;
      } else if (k > regionStart && raw[k - 1] == '#' && raw[k] != '!') {
        commentSeen = true;
      }
    }
    scanned = std::max(scanned, to);
  };
  for (size_t pos = raw.find("{{"); pos != std::string_view::npos; pos = raw.find("{{", pos)) {
    std::string_view name;
    size_t end = matchPlaceholder(raw, pos, name);
    if (end == std::string_view::npos) {
      ++pos;
      continue;
    }
    scanTo(pos);
    if (commentSeen) {
      pos = end;
      continue;
    }
    copySource(pos);
    int line = sourceLine;
    std::string key(name);
    std::string value;
    if (auto it = buildArgs_.find(key); it != buildArgs_.end()) {
      value = nestedValue(it->second, defaults, line);
      usedBuildArgs_.insert(key);
    } else if (auto d = defaults.find(key); d != defaults.end()) {
      value = nestedValue(d->second, defaults, line);
    } else {
      fail(line, "build variable '" + key + "' is not defined (give --build-arg " + key +
                     "=VALUE or a default in %arguments)");
    }
    checkTemplatedSize(out.size() + value.size(), line);
    for (char c : value) {
      out += c;
      if (c == '\n') origin.push_back(line);
    }
    for (size_t i = pos; i < end; ++i)
      if (raw[i] == '\n') ++sourceLine;
    copied = scanned = regionStart = end;
    commentSeen = false;
    pos = end;
  }
  copySource(raw.size());
  return out;
}

void Parser::addHeaderField(Definition& def, std::string_view spelling, std::string value,
                            int line) {
  std::string keyword = lowerCase(spelling);
  bool known = false;
  for (auto k : kHeaderKeywords) known = known || lowerCase(k) == keyword;
  if (!known && keyword.size() > 8 && keyword.starts_with("otherurl"))
    known = std::all_of(keyword.begin() + 8, keyword.end(),
                        [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (!known)
    fail(line, "unknown header keyword '" + std::string(spelling) + "' (expected one of " +
                   joinNames("", kHeaderKeywords) + ")");
  if (keyword == "bootstrap" && value.empty())
    fail(line, "'Bootstrap:' has no value (expected e.g. 'Bootstrap: docker')");
  if (keyword == "fingerprints")
    warn(line, "ctr does not verify signatures: the 'Fingerprints' header is ignored");
  for (auto& field : def.header.fields) {
    if (field.keyword == keyword) {
      field.value = std::move(value);
      field.line = line;
      return;
    }
  }
  def.header.fields.push_back({std::move(keyword), std::move(value), line});
}

// `Keyword: value` lines; '#' starts a comment anywhere; a value ending in '\' continues
// on the next line ("\n\" there puts a newline in the value), as in Apptainer's doHeader.
void Parser::parseHeader(std::span<const Line> lines, Definition& def) {
  std::string pendingKey, pendingValue;
  int pendingLine = 0;
  auto finishPending = [&] {
    if (pendingLine == 0) return;
    addHeaderField(def, pendingKey, std::move(pendingValue), pendingLine);
    pendingKey.clear();
    pendingValue.clear();
    pendingLine = 0;
  };
  for (const auto& line : lines) {
    std::string_view t = trim(line.text);
    if (t.empty() || t.front() == '#') {
      finishPending();
      continue;
    }
    t = trim(beforeComment(t));
    std::string key, value;
    int keyLine = line.number;
    if (pendingLine == 0) {
      size_t colon = t.find(':');
      if (colon == std::string_view::npos)
        fail(line.number,
             "header line '" + std::string(t) + "' has no ':' (expected 'Keyword: value')");
      key = std::string(trim(t.substr(0, colon)));
      value = std::string(trim(t.substr(colon + 1)));
    } else {
      key = std::move(pendingKey);
      value = std::move(pendingValue) + std::string(t);
      keyLine = pendingLine;
      pendingLine = 0;
    }
    if (value.ends_with('\\')) {
      value.pop_back();
      if (value.ends_with("\\n")) value.replace(value.size() - 2, 2, "\n");
      pendingKey = std::move(key);
      pendingValue = std::move(value);
      pendingLine = keyLine;
      continue;
    }
    addHeaderField(def, key, std::move(value), keyLine);
  }
  finishPending();
}

void Parser::appendTo(Section& section, std::string_view args, int line, std::string_view body) {
  if (section.present())
    warn(line, "second %" + section.name + " section: its body is appended to the one at line " +
                   std::to_string(section.line));
  else
    section.line = line;
  if (!args.empty()) section.args = std::string(args);
  section.body += body;
}

// The source and destination of each line; quotes keep blanks in a path.
std::vector<FileEntry> Parser::parseFileEntries(std::span<const Line> lines,
                                                std::string_view what) {
  std::vector<FileEntry> entries;
  for (const auto& line : lines) {
    std::string_view t = trim(line.text);
    if (t.empty() || t.front() == '#') continue;
    std::vector<std::string> words;
    size_t pos = 0;
    while ((pos = t.find_first_not_of(kBlanks, pos)) != std::string_view::npos) {
      char quote = t[pos];
      if (quote == '#') break;
      if (quote == '"' || quote == '\'') {
        size_t close = t.find(quote, pos + 1);
        if (close == std::string_view::npos)
          fail(line.number, "unterminated " + std::string(1, quote) + " in " + std::string(what) +
                                " line '" + std::string(t) + "'");
        words.emplace_back(t.substr(pos + 1, close - pos - 1));
        pos = close + 1;
      } else {
        size_t end = std::min(t.find_first_of(kBlanks, pos), t.size());
        words.emplace_back(t.substr(pos, end - pos));
        pos = end;
      }
    }
    if (words.size() > 2)
      fail(line.number, std::string(what) + " line '" + std::string(t) +
                            "' has more than a source and a destination (quote a path "
                            "that holds blanks)");
    if (words.empty() || words[0].empty())
      fail(line.number, std::string(what) + " line '" + std::string(t) + "' has no source");
    entries.push_back({words[0], words.size() == 2 ? words[1] : std::string(), line.number});
  }
  return entries;
}

void Parser::parseLabels(std::span<const Line> lines, std::vector<Label>& labels) {
  std::map<std::string, size_t, std::less<>> indexOf;
  for (size_t i = 0; i < labels.size(); ++i) indexOf[labels[i].key] = i;
  for (const auto& line : lines) {
    std::string_view t = trim(line.text);
    if (t.empty() || t.front() == '#') continue;
    size_t blank = std::min(t.find_first_of(kBlanks), t.size());
    Label label{std::string(t.substr(0, blank)), std::string(trim(t.substr(blank))), line.number};
    if (auto it = indexOf.find(label.key); it != indexOf.end()) {
      labels[it->second] = std::move(label);
    } else {
      indexOf.emplace(label.key, labels.size());
      labels.push_back(std::move(label));
    }
  }
}

void Parser::addAppSection(Definition& def, const SectionText& text) {
  const std::string& name = text.name;
  const int line = text.line;
  auto words = splitWords(text.args);
  if (words.empty())
    fail(line, "%" + name + " needs an app name (expected '%" + name + " NAME')");
  std::string appName(words[0]);
  if (appName == "." || appName == ".." || appName.find('/') != std::string::npos)
    fail(line, "app name '" + appName + "' must be one path component (it becomes /scif/apps/" +
                   appName + ")");
  if (words.size() > 1)
    warn(line, "%" + name + " " + appName + ": the words after the app name are ignored");
  auto app = std::find_if(def.apps.begin(), def.apps.end(),
                          [&](const App& a) { return a.name == appName; });
  if (app == def.apps.end()) {
    def.apps.push_back(App{});
    app = def.apps.end() - 1;
    app->name = appName;
    app->line = line;
  }
  Section* section = name == "appinstall"  ? &app->install
                     : name == "appfiles"  ? &app->files
                     : name == "appenv"    ? &app->env
                     : name == "apprun"    ? &app->run
                     : name == "applabels" ? &app->labels
                     : name == "apphelp"   ? &app->help
                     : name == "apptest"   ? &app->test
                                           : &app->start;
  appendTo(*section, {}, line, text.body);
  if (name == "appfiles") {
    auto entries = parseFileEntries(text.bodyLines, "%appfiles");
    app->fileEntries.insert(app->fileEntries.end(), entries.begin(), entries.end());
  } else if (name == "applabels") {
    parseLabels(text.bodyLines, app->labelEntries);
  }
}

void Parser::addFilesSection(Definition& def, const SectionText& text) {
  const int line = text.line;
  auto words = splitWords(beforeComment(text.args));
  std::string fromStage;
  if (words.size() == 2 && words[0] == "from") {
    fromStage = std::string(words[1]);
    bool earlier =
        std::any_of(result_.stages.begin(), result_.stages.end(),
                    [&](const Definition& d) { return d.header.stage() == fromStage; });
    if (!earlier)
      fail(line,
           "%files from " + fromStage + ": no earlier stage has 'Stage: " + fromStage + "'");
  } else if (!words.empty()) {
    fail(line, "%files takes nothing or 'from STAGE', not '" + std::string(text.args) + "'");
  }
  auto entries = parseFileEntries(text.bodyLines, "%files");
  auto section = std::find_if(def.files.begin(), def.files.end(),
                              [&](const FilesSection& f) { return f.fromStage == fromStage; });
  if (section == def.files.end()) {
    def.files.push_back({fromStage, {}, line});
    section = def.files.end() - 1;
  }
  section->entries.insert(section->entries.end(), entries.begin(), entries.end());
}

void Parser::addScriptSection(Definition& def, const SectionText& text) {
  const std::string& name = text.name;
  const int line = text.line;
  Section* section = name == "arguments"     ? &def.argumentsSection
                     : name == "pre"         ? &def.pre
                     : name == "setup"       ? &def.setup
                     : name == "post"        ? &def.post
                     : name == "environment" ? &def.environment
                     : name == "runscript"   ? &def.runscript
                     : name == "startscript" ? &def.startscript
                     : name == "test"        ? &def.test
                     : name == "labels"      ? &def.labelsSection
                     : name == "help"        ? &def.help
                                             : nullptr;
  if (section == nullptr)
    fail(line, "unknown section %" + name + " (expected one of " + joinNames("%", kScriptSections) +
                   ", or an app section " + joinNames("%", kAppSections) + ")");
  // Apptainer runs these with `/bin/sh -ex ... -c "ARGS SCRIPT"`: -c needs a command.
  if (name == "pre" || name == "setup" || name == "post" || name == "test") {
    auto words = splitWords(beforeComment(text.args));
    if (!words.empty() && words.back() == "-c")
      fail(line,
           "%" + name + " -c needs an interpreter (expected e.g. '%" + name + " -c /bin/bash')");
  }
  appendTo(*section, text.args, line, text.body);
  if (name == "labels") parseLabels(text.bodyLines, def.labels);
}

void Parser::addSection(Definition& def, const SectionText& text) {
  if (std::find(std::begin(kAppSections), std::end(kAppSections), text.name) != std::end(kAppSections))
    addAppSection(def, text);
  else if (text.name == "files")
    addFilesSection(def, text);
  else
    addScriptSection(def, text);
}

Definition Parser::parseStage(const std::vector<Line>& lines, int firstLine) {
  Definition def;
  def.line = firstLine;
  size_t first = 0;
  while (first < lines.size() && !isSectionLine(lines[first].text)) ++first;
  parseHeader(std::span(lines).first(first), def);

  for (size_t i = first; i < lines.size();) {
    std::string name;
    std::string_view args;
    splitSectionLine(lines[i].text, name, args);
    size_t end = i + 1;
    while (end < lines.size() && !isSectionLine(lines[end].text)) ++end;
    std::string body;
    for (size_t j = i + 1; j < end; ++j) {
      body += lines[j].text;
      body += '\n';
    }
    addSection(def, {name, args, lines[i].number, body, std::span(lines).subspan(i + 1, end - i - 1)});
    i = end;
  }

  if (auto name = def.header.stage(); !name.empty()) {
    for (const auto& earlier : result_.stages)
      if (earlier.header.stage() == name)
        fail(def.header.find("stage")->line, "stage name '" + name +
                                                 "' is already used by the stage at line " +
                                                 std::to_string(earlier.line));
  }
  return def;
}

bool startsStage(std::string_view line) {
  constexpr std::string_view kBootstrap = "bootstrap:";
  return line.size() >= kBootstrap.size() &&
         lowerCase(line.substr(0, kBootstrap.size())) == kBootstrap;
}

DefinitionFile Parser::parse(std::string_view text) {
  // Stage boundaries, found in the text as written (Apptainer's `(?mi)^bootstrap:`).
  struct Chunk {
    size_t begin = 0;
    int line = 1;
  };
  std::vector<Chunk> chunks;
  int lineNumber = 1;
  for (size_t pos = 0; pos < text.size(); ++lineNumber) {
    if (startsStage(text.substr(pos))) chunks.push_back({pos, lineNumber});
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  // Before the first stage only blank lines and comments may stand (Apptainer skips them).
  size_t leadEnd = chunks.empty() ? text.size() : chunks.front().begin;
  for (const auto& line : splitLines(text.substr(0, leadEnd), 1)) {
    std::string_view t = trim(line.text);
    if (!t.empty() && t.front() != '#')
      fail(line.number,
           "missing 'Bootstrap:' header (each stage of a definition starts with a "
           "'Bootstrap:' line)");
  }
  if (chunks.empty()) fail(1, "missing 'Bootstrap:' header (the definition is empty)");

  for (size_t c = 0; c < chunks.size(); ++c) {
    size_t end = c + 1 < chunks.size() ? chunks[c + 1].begin : text.size();
    std::string_view raw = text.substr(chunks[c].begin, end - chunks[c].begin);
    auto defaults = readDefaults(splitLines(raw, chunks[c].line));
    std::vector<int> origin;
    std::string stageText = templated(raw, chunks[c].line, defaults, origin);
    Definition def = parseStage(splitLines(stageText, chunks[c].line, &origin), chunks[c].line);
    def.arguments = std::move(defaults);
    def.raw = std::move(stageText);
    result_.storedText += def.raw;
    result_.stages.push_back(std::move(def));
  }
  for (const auto& [name, value] : buildArgs_)
    if (!usedBuildArgs_.contains(name)) result_.unusedBuildArgs.push_back(name);
  return std::move(result_);
}

// A path for a %files line: quoted when it holds a blank or could be read as a quote or
// comment.
std::string quotedPath(const std::string& path) {
  bool plain = !path.empty() && path.find_first_of(" \t") == std::string::npos &&
               path.front() != '"' && path.front() != '\'' && path.front() != '#';
  if (plain) return path;
  char quote = path.find('"') == std::string::npos ? '"' : '\'';
  return quote + path + quote;
}

void formatEntries(std::string& out, const std::vector<FileEntry>& entries) {
  for (const auto& e : entries) {
    out += "    " + quotedPath(e.source);
    if (!e.destination.empty()) out += " " + quotedPath(e.destination);
    out += '\n';
  }
}

void formatLabels(std::string& out, const std::vector<Label>& labels) {
  for (const auto& l : labels)
    out += "    " + l.key + (l.value.empty() ? "" : " " + l.value) + "\n";
}

void formatBody(std::string& out, const Section& section, std::string_view appName = {}) {
  if (!section.present() && section.body.empty()) return;
  out += "%" + section.name;
  if (!appName.empty()) out += " " + std::string(appName);
  if (!section.args.empty()) out += " " + section.args;
  out += '\n';
  out += section.body;
  if (!section.body.empty() && section.body.back() != '\n') out += '\n';
}

}  // namespace

const HeaderField* Header::find(std::string_view keyword) const {
  for (const auto& field : fields)
    if (field.keyword == keyword) return &field;
  return nullptr;
}

std::string Header::value(std::string_view keyword) const {
  const HeaderField* field = find(keyword);
  return field ? field->value : std::string();
}

DefinitionFile parseDefinition(std::string_view text, std::string_view fileName,
                               const std::map<std::string, std::string>& buildArgs) {
  // A value is one line of text: a newline would start a new line of the definition (a
  // section header such as %setup, which runs on the host), and other control characters
  // have no place in one either.
  for (const auto& [name, value] : buildArgs) {
    for (unsigned char c : value) {
      if (c >= 0x20 && c != 0x7f) continue;
      if (c == '\t') continue;
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", c);
      throw Error("--build-arg " + name + ": the value holds a " +
                  (c == '\n' ? std::string("newline") : c == '\r' ? std::string("carriage return") : "control character " + std::string(code)) +
                  "; a build argument is one line of text")
          .withStatus(1);
    }
  }
  return Parser(fileName, buildArgs).parse(text);
}

}  // namespace ctr::builder::deffile

namespace ctr::builder::deffile {

std::string formatDefinition(const Definition& definition) {
  std::string out;
  for (const auto& field : definition.header.fields) {
    std::string value = field.value;
    // A newline in a value is written as Apptainer's continuation "\n\" at a line end.
    for (size_t nl = value.find('\n'); nl != std::string::npos; nl = value.find('\n', nl + 4))
      value.replace(nl, 1, "\\n\\\n");
    out += field.keyword + ": " + value + "\n";
  }
  out += '\n';
  if (!definition.arguments.empty() || definition.argumentsSection.present()) {
    out += "%arguments\n";
    for (const auto& [name, value] : definition.arguments)
      out += "    " + name + "=" + value + "\n";
    out += '\n';
  }
  formatBody(out, definition.pre);
  formatBody(out, definition.setup);
  for (const auto& files : definition.files) {
    out += files.fromStage.empty() ? "%files\n" : "%files from " + files.fromStage + "\n";
    formatEntries(out, files.entries);
    out += '\n';
  }
  formatBody(out, definition.post);
  formatBody(out, definition.environment);
  formatBody(out, definition.runscript);
  formatBody(out, definition.startscript);
  formatBody(out, definition.test);
  if (!definition.labels.empty() || definition.labelsSection.present()) {
    out += "%labels\n";
    formatLabels(out, definition.labels);
    out += '\n';
  }
  formatBody(out, definition.help);
  for (const auto& app : definition.apps) {
    for (const Section* s : {&app.install, &app.env, &app.run, &app.start, &app.test, &app.help})
      formatBody(out, *s, app.name);
    if (!app.fileEntries.empty() || app.files.present()) {
      out += "%appfiles " + app.name + "\n";
      formatEntries(out, app.fileEntries);
      out += '\n';
    }
    if (!app.labelEntries.empty() || app.labels.present()) {
      out += "%applabels " + app.name + "\n";
      formatLabels(out, app.labelEntries);
      out += '\n';
    }
  }
  return out;
}

std::vector<std::string> scriptCommand(const Section& section, std::string_view scriptPath) {
  std::vector<std::string> argv{"/bin/sh", "-ex"};
  auto params = splitWords(beforeComment(section.args));
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i] != "-c") {
      argv.emplace_back(params[i]);
      continue;
    }
    // Everything after -c is the interpreter and its arguments; the script comes last.
    if (i + 1 == params.size())
      throw Error("%" + section.name + " -c needs an interpreter (expected e.g. '%" + section.name +
                  " -c /bin/bash')");
    std::string command;
    for (size_t j = i + 1; j < params.size(); ++j) command += std::string(params[j]) + " ";
    argv.emplace_back("-c");
    argv.push_back(command + std::string(scriptPath));
    return argv;
  }
  argv.emplace_back(scriptPath);
  return argv;
}

std::string shebangScript(const Section& section) {
  std::string shebang = "#!/bin/sh";
  std::string_view script = section.body;
  // The body's own #! line, after any blank lines (Apptainer looks only at the first line
  // and then writes an empty one).
  std::string_view rest = section.body;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    std::string_view after =
        nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (trim(line).empty()) {
      rest = after;
      continue;
    }
    if (trim(line).starts_with("#!")) {
      shebang = std::string(trim(line));
      script = after;
    }
    break;
  }
  if (auto args = trim(beforeComment(section.args)); !args.empty())
    shebang += " " + std::string(args);
  return shebang + "\n\n" + std::string(script) + "\n";
}

}  // namespace ctr::builder::deffile
