// PhaseDisplay (build_progress.hpp): the updating line of `ctr build` on a terminal.
#include "build_progress.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ctr/status_line.hpp"

namespace ctr::builder {

namespace {

double monotonicSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string tailOfFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const off_t end = ::lseek(fd, 0, SEEK_END);
  char buf[4096];
  const off_t start = end > static_cast<off_t>(sizeof buf) ? end - static_cast<off_t>(sizeof buf) : 0;
  const ssize_t n = end > 0 ? ::pread(fd, buf, static_cast<std::size_t>(end - start), start) : 0;
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// The redrawing process: reads "P<phase>\n", "L<line>\n" and "S\n" from `channel`, draws
// on `tty`, and on end of input clears its line and exits.
[[noreturn]] void tickerMain(int channel, int tty, const std::string& label, const std::string& logPath) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP}) ::signal(sig, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  StatusLine display(tty);
  std::string phase, pending;
  bool drawing = false;
  double started = monotonicSeconds();
  auto draw = [&] {
    if (!drawing) return;
    const std::string lastLog = PhaseDisplay::lastLine(tailOfFile(logPath));
    display.show(PhaseDisplay::render(label, phase, monotonicSeconds() - started,
                                      lastLog.starts_with("==> ") ? "" : lastLog, StatusLine::columns(tty)));
  };
  for (;;) {
    pollfd p{channel, POLLIN, 0};
    const int ready = ::poll(&p, 1, 500);
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0) {
      char buf[4096];
      const ssize_t n = ::read(channel, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      pending.append(buf, static_cast<std::size_t>(n));
      std::size_t nl;
      while ((nl = pending.find('\n')) != std::string::npos) {
        const std::string message = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        if (message.empty()) continue;
        const std::string text = message.substr(1);
        if (message[0] == 'P') {
          phase = text;
          started = monotonicSeconds();
          drawing = true;
        } else if (message[0] == 'L') {
          display.print(text);
        } else if (message[0] == 'S') {
          display.clear();
          drawing = false;
        }
      }
    }
    draw();
  }
  display.clear();
  ::_exit(0);
}

}  // namespace

PhaseDisplay::PhaseDisplay(int fd, std::string label, std::string logPath, bool quiet)
    : quiet_(quiet), label_(std::move(label)), logPath_(std::move(logPath)) {
  fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (fd_ < 0 || quiet_) return;
  tty_ = ::isatty(fd_) == 1;
  if (!tty_) return;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    tty_ = false;  // plain lines then
    return;
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pair[0]);
    ::close(pair[1]);
    tty_ = false;
    return;
  }
  if (pid == 0) {
    // Only the channel and the terminal stay open: the build's files and pipes are not
    // held by this process.
    const int channel = ::fcntl(pair[1], F_DUPFD, 100);
    const int tty = ::fcntl(fd_, F_DUPFD, 101);
    if (channel < 0 || tty < 0 || ::dup2(channel, 3) < 0 || ::dup2(tty, 4) < 0) ::_exit(0);
    ::close_range(5, ~0U, 0);
    tickerMain(3, 4, label_, logPath_);
  }
  ::close(pair[1]);
  channel_ = pair[0];
  ticker_ = pid;
}

PhaseDisplay::~PhaseDisplay() {
  finish();
  if (fd_ >= 0) ::close(fd_);
}

void PhaseDisplay::send(char kind, const std::string& text) {
  std::string message(1, kind);
  for (char c : text) message += c == '\n' ? ' ' : c;
  message += '\n';
  std::size_t done = 0;
  while (done < message.size()) {
    const ssize_t n = ::send(channel_, message.data() + done, message.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

void PhaseDisplay::plain(const std::string& text) {
  if (fd_ >= 0 && !quiet_) StatusLine(fd_).print(text);
}

void PhaseDisplay::phase(const std::string& text) {
  if (channel_ >= 0) send('P', text);
  else plain(label_ + ": " + text);
}

void PhaseDisplay::line(const std::string& text) {
  if (channel_ >= 0) send('L', text);
  else plain(text);
}

void PhaseDisplay::suspend() {
  if (channel_ >= 0) send('S', "");
}

void PhaseDisplay::finish() {
  if (channel_ < 0) return;
  ::close(channel_);
  channel_ = -1;
  int status = 0;
  while (::waitpid(ticker_, &status, 0) < 0 && errno == EINTR) {
  }
  ticker_ = -1;
}

std::string PhaseDisplay::lastLine(const std::string& text) {
  std::size_t end = text.size();
  while (end > 0) {
    const std::size_t start = text.rfind('\n', end - 1);
    const std::size_t from = start == std::string::npos ? 0 : start + 1;
    std::string line = text.substr(from, end - from);
    // A line ended by '\r' (apt's own progress) shows its last version.
    if (const auto cr = line.find_last_of('\r', line.size() > 1 ? line.size() - 2 : 0);
        cr != std::string::npos && cr + 1 < line.size())
      line = line.substr(cr + 1);
    if (line.find_first_not_of(" \t\r") != std::string::npos) return line;
    if (start == std::string::npos) break;
    end = start;
  }
  return {};
}

std::string PhaseDisplay::render(const std::string& label, const std::string& phase, double seconds,
                                 const std::string& lastLog, int columns) {
  char took[32];
  std::snprintf(took, sizeof took, " [%.0f s]", seconds < 0 ? 0.0 : seconds);
  std::string out = label + ": " + phase + took;
  std::string log;
  for (char c : lastLog)
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) log += c;
    else if (c == '\t') log += ' ';
  if (const auto b = log.find_first_not_of(' '); b != std::string::npos) out += "  " + log.substr(b);
  return StatusLine::fit(out, columns - 1);
}

}  // namespace ctr::builder
