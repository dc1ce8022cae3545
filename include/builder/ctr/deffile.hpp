// Apptainer definition files (`ctr build x.sif recipe.def`, issue 9): the text parsed into
// plain data, one Definition per build stage. Pure code: the caller reads the file, the
// builder acts on the result.
//
// Semantics follow Apptainer's parser (pkg/build/types/parser/deffile.go) and build-arg
// templating (internal/pkg/build/args), with these deliberate differences, each because
// Apptainer silently does something the author cannot have meant:
//  - a headerless definition (which Apptainer accepts only for `build --update`) is refused;
//  - `%files` takes nothing or `from STAGE` naming an earlier stage; a %files line with a
//    third word that is not a `#` comment, an unterminated quote or an empty source is
//    refused (Apptainer ignores the extra word, mis-splits single quotes and skips the
//    empty source); a `#` word starts a comment (Apptainer copies to a file named `#`);
//  - an app name must be one path component (it becomes /scif/apps/NAME);
//  - two stages may not share a `Stage:` name;
//  - section names and labels split at a tab as well as at a space;
//  - a header continuation at the end of the header is kept (Apptainer drops it).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ctr::builder::deffile {

// One `Keyword: value` line of a stage's header.
struct HeaderField {
  std::string keyword;  // lower-case, as Apptainer keys its header: "bootstrap", "from"
  std::string value;    // trimmed, without its `#` comment; continuation lines joined
  int line = 0;

  friend bool operator==(const HeaderField&, const HeaderField&) = default;
};

struct Header {
  // In file order. A keyword given twice keeps its first place and takes the later value
  // and line (Apptainer keeps the last value).
  std::vector<HeaderField> fields;

  // The field for `keyword` (lower-case), or nullptr.
  [[nodiscard]] const HeaderField* find(std::string_view keyword) const;
  // The value of `keyword`, or "" when the header does not have it.
  [[nodiscard]] std::string value(std::string_view keyword) const;

  [[nodiscard]] std::string bootstrap() const { return value("bootstrap"); }
  [[nodiscard]] std::string from() const { return value("from"); }
  [[nodiscard]] std::string osVersion() const { return value("osversion"); }
  [[nodiscard]] std::string mirrorUrl() const { return value("mirrorurl"); }
  [[nodiscard]] std::string include() const { return value("include"); }
  [[nodiscard]] std::string stage() const { return value("stage"); }

  friend bool operator==(const Header&, const Header&) = default;
};

// A script-like section. A section given twice has its bodies concatenated and the later
// arguments, when it has any (Apptainer's rule).
struct Section {
  std::string name;  // without '%': "post", "runscript", "appinstall"
  std::string args;  // the words after the name (app sections: after the app name), trimmed
  // The lines after the section line up to the next section, verbatim (comments and
  // blank lines kept, CR of CRLF removed), each ending in '\n'.
  std::string body;
  int line = 0;  // of the first section line; 0 when the definition has no such section

  [[nodiscard]] bool present() const { return line != 0; }

  friend bool operator==(const Section&, const Section&) = default;
};

inline Section namedSection(std::string name) {
  Section section;
  section.name = std::move(name);
  return section;
}

// One `src [dest]` line of %files or %appfiles; quotes ("a b" or 'a b') keep blanks.
struct FileEntry {
  std::string source;
  std::string destination;  // empty: the same path as `source`
  int line = 0;

  friend bool operator==(const FileEntry&, const FileEntry&) = default;
};

// The %files sections with one source; sections with the same source are merged in file
// order, as Apptainer does.
struct FilesSection {
  std::string fromStage;  // empty: from the host
  std::vector<FileEntry> entries;
  int line = 0;  // of the first such section

  friend bool operator==(const FilesSection&, const FilesSection&) = default;
};

// One %labels (or %applabels) line: the key is the first word, the value the rest of the
// line, trimmed.
struct Label {
  std::string key;
  std::string value;
  int line = 0;

  friend bool operator==(const Label&, const Label&) = default;
};

// A SCIF app: its %app* sections, gathered by app name.
struct App {
  std::string name;
  int line = 0;  // of its first section
  Section install = namedSection("appinstall"), files = namedSection("appfiles"),
          env = namedSection("appenv"), run = namedSection("apprun"),
          labels = namedSection("applabels"), help = namedSection("apphelp"),
          test = namedSection("apptest"), start = namedSection("appstart");
  std::vector<FileEntry> fileEntries;  // %appfiles parsed
  std::vector<Label> labelEntries;     // %applabels parsed; a repeated key takes the later value

  friend bool operator==(const App&, const App&) = default;
};

// One build stage: a `Bootstrap:` header and the sections up to the next one.
struct Definition {
  int line = 0;  // of its `Bootstrap:` line
  Header header;
  // %arguments parsed as written, before templating: name -> default value.
  std::map<std::string, std::string> arguments;
  Section argumentsSection = namedSection("arguments");
  Section pre = namedSection("pre"), setup = namedSection("setup"), post = namedSection("post"),
          environment = namedSection("environment"), runscript = namedSection("runscript"),
          startscript = namedSection("startscript"), test = namedSection("test"),
          help = namedSection("help");
  std::vector<FilesSection> files;  // in order of each source's first %files section
  Section labelsSection = namedSection("labels");
  std::vector<Label> labels;  // %labels parsed; a repeated key takes the later value
  std::vector<App> apps;      // in order of first appearance, the order they are installed in
  // This stage's text after templating, CRLF kept: the pieces of what is stored.
  std::string raw;

  friend bool operator==(const Definition&, const Definition&) = default;
};

struct DefinitionFile {
  std::vector<Definition> stages;  // in file order; the last one is the image
  // "FILE:LINE: ..." notes that do not stop a build (a skipped %arguments line, a second
  // %post appended to the first, the unchecked Fingerprints header).
  std::vector<std::string> warnings;
  // --build-arg names no stage used, sorted. Apptainer fails the build on them unless
  // --warn-unused-build-args is given; the caller decides.
  std::vector<std::string> unusedBuildArgs;
  // What Apptainer stores as the SIF definition object and /.singularity.d/Singularity:
  // the stages' templated text, concatenated (so comments before the first `Bootstrap:`
  // are not kept).
  std::string storedText;
};

// Parses a definition file. `fileName` names it in messages; `buildArgs` are the
// --build-arg values, which override %arguments defaults (each one line: a value with a
// newline or another control character but tab is refused). Throws ctr::Error
// "FILE:LINE: what was expected" for a malformed definition.
[[nodiscard]] DefinitionFile parseDefinition(std::string_view text, std::string_view fileName,
                                             const std::map<std::string, std::string>& buildArgs);

// A definition rendered from its data in canonical form: lower-case `keyword: value`
// header lines, a blank line, then the sections that are present, bodies verbatim. For a
// definition made in code (a build from docker://...), where there is no text to store;
// parsing the result gives the same data back when values hold no `#`, `{{ }}` or newline.
[[nodiscard]] std::string formatDefinition(const Definition& definition);

// The argv that runs a section's script (%pre, %setup, %post, %test) from `scriptPath`,
// as Apptainer does: `/bin/sh -ex [args] SCRIPT`, or with `-c INTERP ARGS`:
// `/bin/sh -ex -c "INTERP ARGS SCRIPT"`. A `#` in the section arguments starts a comment.
[[nodiscard]] std::vector<std::string> scriptCommand(const Section& section,
                                                     std::string_view scriptPath);

// The file text of /.singularity.d/runscript, startscript or test: the body's own `#!` line
// or `#!/bin/sh`, followed by the section arguments (up to a `#`), a blank line and the
// rest of the body.
[[nodiscard]] std::string shebangScript(const Section& section);

}  // namespace ctr::builder::deffile
