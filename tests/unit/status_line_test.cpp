// ctr::StatusLine: the one progress display (ctr/status_line.hpp), on a pipe and on a
// pseudo-terminal.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "ctr/fd.hpp"
#include "ctr/status_line.hpp"

using ctr::StatusLine;

namespace {

std::string readAvailable(int fd) {
  std::string out;
  char buf[256];
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

}  // namespace

TEST(StatusLine, OnAPipeShowsNothingAndPrintsLines) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ctr::UniqueFd in(p[0]), out(p[1]);
  StatusLine line(out.get());
  EXPECT_FALSE(line.tty());
  line.show("block 1/10");
  line.print("fio: PASS");
  line.clear();
  EXPECT_EQ(readAvailable(in.get()), "fio: PASS\n");
}

TEST(StatusLine, OnATerminalRewritesOneLineAndPrintsAboveIt) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) GTEST_SKIP() << "no pseudo-terminal here (posix_openpt failed)";
  ctr::UniqueFd m(master);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  ctr::UniqueFd slave(::open(::ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC));
  ASSERT_TRUE(slave.valid());
  termios raw{};
  ASSERT_EQ(::tcgetattr(slave.get(), &raw), 0);
  ::cfmakeraw(&raw);  // no "\n" -> "\r\n" on the way
  ASSERT_EQ(::tcsetattr(slave.get(), TCSANOW, &raw), 0);
  winsize ws{};
  ws.ws_col = 12;
  ws.ws_row = 24;
  ASSERT_EQ(::ioctl(slave.get(), TIOCSWINSZ, &ws), 0);

  StatusLine line(slave.get());
  EXPECT_TRUE(line.tty());
  line.show("layer 1: 10.0 MiB");  // cut to 11 columns
  line.print("done");
  line.clear();                    // nothing shown: nothing written
  line.show("x");
  line.clear();
  EXPECT_EQ(readAvailable(m.get()), "\r\033[Klayer 1: 10\r\033[Kdone\n\r\033[Kx\r\033[K");
}

TEST(StatusLine, FitCutsBytesButNeverInsideACharacter) {
  EXPECT_EQ(StatusLine::fit("abcdef", 4), "abcd");
  EXPECT_EQ(StatusLine::fit("abc", 10), "abc");
  EXPECT_EQ(StatusLine::fit("a\xc3\xa9z", 2), "a");     // é would be split: it goes
  EXPECT_EQ(StatusLine::fit("a\xc3\xa9z", 3), "a\xc3\xa9");
  EXPECT_EQ(StatusLine::fit("abc", 0), "");
  EXPECT_EQ(StatusLine::fit("abc", -1), "");
}
