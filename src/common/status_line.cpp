// StatusLine (ctr/status_line.hpp): the updating line on a terminal.
#include "ctr/status_line.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

namespace ctr {

namespace {

void writeAll(int fd, std::string_view text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed terminal: the display is not worth failing for
    done += static_cast<std::size_t>(n);
  }
}

constexpr std::string_view kClear = "\r\033[K";  // to the line's start, erase to its end

}  // namespace

StatusLine::StatusLine(int fd) : fd_(fd), tty_(::isatty(fd) == 1) {}

void StatusLine::show(std::string_view text) {
  if (!tty_) return;
  std::string out(kClear);
  out += fit(text, columns(fd_) - 1);  // the last column would wrap on some terminals
  writeAll(fd_, out);
  shown_ = true;
}

void StatusLine::print(std::string_view text) {
  clear();
  std::string out(text);
  out += '\n';
  writeAll(fd_, out);
}

void StatusLine::clear() {
  if (shown_) writeAll(fd_, kClear);
  shown_ = false;
}

int StatusLine::columns(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

std::string StatusLine::fit(std::string_view text, int width) {
  const std::size_t limit = width > 0 ? static_cast<std::size_t>(width) : 0;
  std::string out(text.substr(0, limit));
  // Not in the middle of a UTF-8 sequence: when the first byte cut off continues a
  // character, that character goes too.
  if (text.size() > limit && (static_cast<unsigned char>(text[limit]) & 0xC0) == 0x80) {
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty()) out.pop_back();  // its lead byte
  }
  return out;
}

}  // namespace ctr
