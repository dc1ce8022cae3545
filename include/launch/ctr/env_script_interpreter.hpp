// Applying an image's /.singularity.d/env/*.sh without starting a shell.
//
// Apptainer-built images carry these scripts; most are Apptainer's stock templates and the
// rest are usually `export K="value"` lines. Sourcing them costs one /bin/sh start per
// launch. This interpreter runs the subset of POSIX sh those files use and gives exactly
// the environment sourcing them in `sh` would; anything outside the subset makes it decline
// (with the reason), and the caller falls back to the shell. The subset:
//   - comments, blank lines, `\`-newline continuations, `;` and newlines as separators;
//   - `NAME=WORD ...` (assignments only; one followed by a command is declined),
//     `export NAME[=WORD] ...`, `unset [-v] NAME ...`, `:` and `true`;
//   - `if COND; then ... [elif COND; then ...] [else ...] fi`, where COND is
//     `[ ... ]` or `test ...` with -z, -n, = or != (or one word) or the file tests -e, -f,
//     -d, -r, -x (asked of ShellHost), optionally negated by `!`;
//   - `. FILE` (one argument; the file's text from ShellHost, nested at most 16 deep);
//   - words made of plain characters, '...', "..." and \c, with $NAME, ${NAME},
//     ${NAME:-W}, ${NAME-W}, ${NAME:+W}, ${NAME+W} and ${NAME:=W}/${NAME=W} expansions.
// Declined: command substitution, arithmetic, positional and special parameters, globbing
// and field splitting of unquoted expansions in command arguments, tilde expansion, other
// commands (source, set, cd, ...), `. FILE ARGS`, functions, loops, case, pipelines, redirections.
// The body of a branch not taken must still be within the subset, so a decision never
// depends on what a shell would have done with code we skipped.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ctr::launch {

// Shell variables: value and whether they are exported. Starts as the exported environment.
struct ShellVars {
  struct Var {
    std::string value;
    bool set = true;       // `export NAME` of an unset name: exported, not set
    bool exported = true;
  };
  std::map<std::string, Var> vars;
};

// What the interpreter asks of the file system (the container's, at run time).
struct ShellHost {
  // `. FILE`: the file's text, nullopt when it cannot be read (the script is then declined:
  // a shell would stop there). May throw ctr::Error (a FIFO, a device, an oversized file).
  std::function<std::optional<std::string>(const std::string&)> readFile;
  // `[ -OP FILE ]` for OP in e, f, d, r, x.
  std::function<bool(char, const std::string&)> testFile;
};

// Runs `script` on `vars`. Returns "" when it was applied, else why it was declined (and
// `vars` must then be discarded: it may hold a partial application). Without `host`, file
// tests and `.` are declined.
[[nodiscard]] std::string interpretEnvScript(std::string_view script, ShellVars& vars,
                                             const ShellHost* host = nullptr);

}  // namespace ctr::launch
