// What `ctr build` shows while it runs (issue 9 item 6). On a terminal: one line that is
// rewritten in place with the current phase, how long it has run and the last line of the
// build log, redrawn twice a second by a small forked process (a process, not a thread:
// the build's steps enter user namespaces, which a multi-threaded process cannot).
// Otherwise: one plain line per phase. Drawn with ctr::StatusLine (ctr/status_line.hpp).
#pragma once

#include <string>
#include <sys/types.h>

namespace ctr::builder {

class PhaseDisplay {
 public:
  // `fd` is duplicated (the build later points fd 2 at its log); `label` starts each line
  // ("ctr build"); `logPath` is read for the last line of output; `quiet`: show nothing.
  PhaseDisplay(int fd, std::string label, std::string logPath, bool quiet = false);
  ~PhaseDisplay();  // finish()
  PhaseDisplay(const PhaseDisplay&) = delete;
  PhaseDisplay& operator=(const PhaseDisplay&) = delete;

  [[nodiscard]] bool tty() const { return tty_; }
  // A new current phase: the updating line on a terminal, a plain line otherwise.
  void phase(const std::string& text);
  // A line that stays (warnings, the result), printed above the updating line.
  void line(const std::string& text);
  // Stops redrawing until the next phase (something else writes to the terminal).
  void suspend();
  // Clears the updating line and ends the redrawing process; idempotent.
  void finish();

  // Pure helpers, for tests: the updating line for `phase` after `seconds`, with `lastLog`
  // (its control characters dropped), cut to `columns` - 1 characters.
  [[nodiscard]] static std::string render(const std::string& label, const std::string& phase, double seconds,
                                          const std::string& lastLog, int columns);
  // The last non-blank line of `text`.
  [[nodiscard]] static std::string lastLine(const std::string& text);

 private:
  void send(char kind, const std::string& text);
  void plain(const std::string& text);

  int fd_ = -1;
  bool tty_ = false;
  bool quiet_ = false;
  std::string label_;
  std::string logPath_;
  int channel_ = -1;
  pid_t ticker_ = -1;
};

}  // namespace ctr::builder
