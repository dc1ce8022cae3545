// The stage directory's keeper (ctr/stage.hpp): copies made once, checked by size and mtime,
// made again when the source changes, the least recently used evicted, one copier at a time.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ctr/error.hpp"
#include "ctr/stage.hpp"

namespace fs = std::filesystem;
namespace stage = ctr::image::stage;

namespace {

class Stage : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/stage-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    dir_ = root_ / "stage";
  }
  void TearDown() override {
    ::chmod(dir_.c_str(), 0700);
    fs::remove_all(root_);
  }

  // A source file of `bytes` bytes (its content names it), and the File that stages it.
  stage::File source(const std::string& name, std::size_t bytes) {
    const fs::path path = root_ / name;
    std::ofstream(path) << std::string(bytes, name[0]);
    return describe(path);
  }
  stage::File describe(const fs::path& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0);
    return {path, dir_ / stage::copyName(path), static_cast<std::uint64_t>(st.st_size),
            static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
  }
  static std::string read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static ino_t inodeOf(const fs::path& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  }

  fs::path root_, dir_;
};

TEST_F(Stage, CopiesOnceAndAgainWhenTheSourceChanges) {
  auto file = source("app.sif", 5000);
  EXPECT_TRUE(stage::ensure(dir_, file, 1 << 20));
  EXPECT_EQ(read(file.copy), read(file.source));
  struct stat st {};
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700U) << "the stage directory is the user's alone";
  const ino_t first = inodeOf(file.copy);
  EXPECT_FALSE(stage::ensure(dir_, file, 1 << 20)) << "a matching copy is used as it is";
  EXPECT_EQ(inodeOf(file.copy), first);

  // The source rewritten in place (same name, new size and time): a new copy for a launch
  // that saw the new one; one that saw the old one still finds its copy.
  std::ofstream(file.source) << std::string(6000, 'b');
  const auto changed = describe(file.source);
  EXPECT_FALSE(stage::ensure(dir_, file, 1 << 20));
  EXPECT_TRUE(stage::ensure(dir_, changed, 1 << 20));
  EXPECT_EQ(read(changed.copy), std::string(6000, 'b'));
  EXPECT_NE(inodeOf(changed.copy), first);
  ASSERT_EQ(stage::list(dir_).size(), 1U) << "one copy per source path";
}

TEST_F(Stage, ASourceThatChangedSinceThePlanIsNotCopied) {
  auto file = source("app.sif", 5000);
  std::ofstream(file.source) << std::string(10, 'x');
  try {
    (void)stage::ensure(dir_, file, 1 << 20);
    FAIL() << "a source that changed since the launch looked at it was copied";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("changed since this launch looked at it"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(file.copy));
  EXPECT_TRUE(stage::list(dir_).empty());
}

TEST_F(Stage, LeastRecentlyUsedCopiesMakeRoom) {
  auto a = source("a.sqfs", 4000), b = source("b.sqfs", 4000), c = source("c.sqfs", 4000);
  ASSERT_TRUE(stage::ensure(dir_, a, 10000));
  ASSERT_TRUE(stage::ensure(dir_, b, 10000));
  // a used again, later than b: b is the least recently used when c needs room.
  const struct timespec old[2] = {{1000, 0}, {0, UTIME_OMIT}};
  ASSERT_EQ(::utimensat(AT_FDCWD, b.copy.c_str(), old, 0), 0);
  ASSERT_FALSE(stage::ensure(dir_, a, 10000));
  ASSERT_TRUE(stage::ensure(dir_, c, 10000));
  EXPECT_TRUE(fs::exists(a.copy));
  EXPECT_FALSE(fs::exists(b.copy)) << "the least recently used copy went";
  EXPECT_TRUE(fs::exists(c.copy));
  const auto entries = stage::list(dir_);
  ASSERT_EQ(entries.size(), 2U);

  auto big = source("big.sif", 20000);
  try {
    (void)stage::ensure(dir_, big, 10000);
    FAIL() << "a file larger than 'stage max size' was copied";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'stage max size'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(big.copy));
  EXPECT_EQ(stage::clean(dir_, std::chrono::hours(1), false).size(), 0U) << "both used just now";
  EXPECT_EQ(stage::clean(dir_, std::nullopt, true).size(), 2U);
  EXPECT_EQ(stage::list(dir_).size(), 2U) << "a dry run removes nothing";
  EXPECT_EQ(stage::clean(dir_, std::nullopt, false).size(), 2U);
  EXPECT_TRUE(stage::list(dir_).empty());
}

TEST_F(Stage, WhatAKilledCopierLeftGoesWithTheNextCopy) {
  auto a = source("a.sqfs", 100);
  ASSERT_TRUE(stage::ensure(dir_, a, 1 << 20));
  const fs::path left = dir_ / ("." + a.copy.filename().string() + ".Ab12Cd");
  std::ofstream(left) << "half a copy";
  EXPECT_EQ(stage::list(dir_).size(), 1U) << "a copy being made is not listed";
  auto b = source("b.sqfs", 100);
  ASSERT_TRUE(stage::ensure(dir_, b, 1 << 20));
  EXPECT_FALSE(fs::exists(left));
}

TEST_F(Stage, ADirectoryOthersCanWriteIsRefused) {
  fs::create_directories(dir_);
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  auto a = source("a.sqfs", 100);
  try {
    (void)stage::ensure(dir_, a, 1 << 20);
    FAIL() << "a stage directory anyone can write was used";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is writable by others (mode 0777): refused"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(a.copy));
  auto elsewhere = a;
  elsewhere.copy = root_ / "x" / "copy";
  EXPECT_THROW((void)stage::ensure(dir_, elsewhere, 1 << 20), ctr::Error) << "a copy outside the directory";
}

TEST_F(Stage, ConcurrentLaunchesMakeOneCopy) {
  auto file = source("shared.sif", 8 << 20);
  constexpr int kLaunches = 6;
  pid_t pids[kLaunches];
  for (auto& pid : pids) {
    pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        ::_exit(stage::ensure(dir_, file, 64 << 20) ? 10 : 0);
      } catch (...) {
        ::_exit(1);
      }
    }
  }
  int copied = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 1) << "a launch failed to stage";
    copied += WEXITSTATUS(status) == 10 ? 1 : 0;
  }
  EXPECT_EQ(copied, 1) << "one copier, the others waited and found its copy";
  EXPECT_EQ(read(file.copy), read(file.source));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 2U) << "the copy and the lock, nothing half-made";
}

}  // namespace
