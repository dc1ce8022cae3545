// Bounded, type-checked reads of files that decide what a launch does (issue 14, item 6),
// and bounded captures of a program's output.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/run_process.hpp"

namespace {

class CheckedRead : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ctr-checked-read.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string errorOf(const std::string& path, std::size_t limit,
                      ctr::PipesAllowed pipes = ctr::PipesAllowed::No) {
    try {
      ctr::readCheckedFile(path, limit, "test file " + path, pipes);
    } catch (const ctr::Error& e) {
      return e.oneLine();
    }
    return "";
  }

  std::string dir_;
};

TEST_F(CheckedRead, ReadsARegularFileWithinTheLimit) {
  ctr::writeFile(dir_ + "/f", "a=1\n");
  EXPECT_EQ(ctr::readCheckedFile(dir_ + "/f", 4, "f"), "a=1\n");
}

TEST_F(CheckedRead, RefusesAFileOverTheLimitByItsSize) {
  ctr::writeFile(dir_ + "/f", "12345");
  EXPECT_NE(errorOf(dir_ + "/f", 4).find("is larger than 4 bytes (5)"), std::string::npos);
  // A sparse 1 GiB file is refused from its size, without reading a byte of it.
  const std::string sparse = dir_ + "/sparse";
  ctr::UniqueFd fd(::open(sparse.c_str(), O_WRONLY | O_CREAT, 0600));
  ASSERT_TRUE(fd);
  ASSERT_EQ(::ftruncate(fd.get(), 1LL << 30), 0);
  EXPECT_NE(errorOf(sparse, 1 << 20).find("larger than 1048576 bytes (1073741824)"), std::string::npos);
}

TEST_F(CheckedRead, RefusesDevicesDirectoriesAndNamedFifosWithoutBlocking) {
  EXPECT_NE(errorOf("/dev/zero", 1 << 20).find("test file /dev/zero is a character device"),
            std::string::npos);
  EXPECT_NE(errorOf(dir_, 1 << 20).find("is a directory"), std::string::npos);
  EXPECT_EQ(ctr::readCheckedFile("/dev/null", 16, "/dev/null"), "");  // the usual "nothing"
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Nobody writes it: a blocking open would hang here for ever.
  EXPECT_NE(errorOf(fifo, 1 << 20).find("is a FIFO, not a regular file"), std::string::npos);
}

TEST_F(CheckedRead, ReadsAPipeWhereAllowedAndStillBoundsIt) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // No writer: reads as empty at once.
  EXPECT_EQ(ctr::readCheckedFile(fifo, 16, "fifo", ctr::PipesAllowed::Yes), "");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "B=2\n", 4), 4);
  ::close(fds[1]);
  ctr::UniqueFd readEnd(fds[0]);
  EXPECT_EQ(ctr::readCheckedFile(readEnd.get(), 16, "pipe", ctr::PipesAllowed::Yes), "B=2\n");
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "0123456789", 10), 10);
  ::close(fds[1]);
  ctr::UniqueFd bigEnd(fds[0]);
  try {
    ctr::readCheckedFile(bigEnd.get(), 4, "pipe", ctr::PipesAllowed::Yes);
    ADD_FAILURE() << "a pipe over the limit was read";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("larger than 4 bytes"), std::string::npos) << e.what();
  }
}

TEST(BoundedCapture, CutsOffAProgramThatWritesTooMuch) {
  ctr::ProcessOptions options;
  options.captureStdout = true;
  options.captureLimit = 1 << 16;
  auto result = ctr::runProcess({"/bin/sh", "-c", "exec cat /dev/zero"}, options);
  EXPECT_TRUE(result.overflowed);
  EXPECT_LE(result.capturedStdout.size(), std::size_t{1} << 16);
  EXPECT_FALSE(result.ok());  // cat got SIGPIPE (or EPIPE)
  auto small = ctr::runProcess({"/bin/echo", "hi"}, options);
  EXPECT_FALSE(small.overflowed);
  EXPECT_EQ(small.capturedStdout, "hi\n");
}

}  // namespace
