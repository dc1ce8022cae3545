// The one progress display of ctr: `ctr pull` (oci::Progress), `ctr build` (PhaseDisplay) and
// ctr-bench draw through it. On a terminal: one line rewritten in place, cut to the
// terminal's width, with the lines that stay printed above it. Elsewhere (a log file, a
// pipe, CI): no updating line at all, only the lines that stay. Writes with write(2), so
// that it also works in a forked process and never waits in a stdio buffer. A small own
// class: Debian packages no C or C++ progress-bar library (indicators is not in Debian).
#pragma once

#include <string>
#include <string_view>

namespace ctr {

class StatusLine {
 public:
  // `fd` is not owned. Whether it is a terminal is read once, here.
  explicit StatusLine(int fd);

  [[nodiscard]] bool tty() const { return tty_; }
  // On a terminal: the updating line becomes `text` (cut to the width). Elsewhere: nothing.
  void show(std::string_view text);
  // A line that stays: the updating line is cleared first (it comes back with the next show).
  void print(std::string_view text);
  // Clears the updating line, if one is shown.
  void clear();

  // The terminal's width in columns, 80 when `fd` is no terminal.
  [[nodiscard]] static int columns(int fd);
  // `text` cut to at most `width` bytes, never inside a UTF-8 sequence (bytes, not
  // characters: a cut line never wraps).
  [[nodiscard]] static std::string fit(std::string_view text, int width);

 private:
  int fd_;
  bool tty_;
  bool shown_ = false;
};

}  // namespace ctr
