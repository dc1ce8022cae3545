#include "ctr/option_filter.hpp"

#include <gtest/gtest.h>

using ctr::cli::OptionFilter;

TEST(OptionFilter, DefaultWantsEverything) {
  OptionFilter all;
  EXPECT_TRUE(all.everything());
  EXPECT_TRUE(all.wants("-B,--bind"));
  EXPECT_TRUE(all.wants("--memory"));
}

TEST(OptionFilter, NoOptionsWantOnlyPositionals) {
  OptionFilter f({"app.sif", "python3", "train.py"});
  EXPECT_FALSE(f.everything());
  EXPECT_FALSE(f.wants("-B,--bind"));
  EXPECT_FALSE(f.wants("--nv"));
  EXPECT_TRUE(f.wants("image"));
  EXPECT_TRUE(f.wants("args"));
}

TEST(OptionFilter, LongNamesWithAndWithoutValues) {
  OptionFilter f({"--nv", "--bind=/scratch:/scratch", "--pwd", "/x", "app.sif", "cmd"});
  EXPECT_TRUE(f.wants("--nv"));
  EXPECT_TRUE(f.wants("-B,--bind"));
  EXPECT_TRUE(f.wants("--pwd,--cwd"));
  EXPECT_FALSE(f.wants("--rocm"));
  EXPECT_FALSE(f.wants("-c,--contain")) << "--containall is not --contain";
  OptionFilter g({"--cwd", "/x"});
  EXPECT_TRUE(g.wants("--pwd,--cwd")) << "any name of the option";
}

TEST(OptionFilter, ShortClustersAndAttachedValues) {
  OptionFilter f({"-ce", "-B/data", "app.sif"});
  EXPECT_TRUE(f.wants("-c,--contain"));
  EXPECT_TRUE(f.wants("-e,--cleanenv"));
  EXPECT_TRUE(f.wants("-B,--bind"));
  EXPECT_FALSE(f.wants("-p,--pid"));
  EXPECT_FALSE(f.wants("-C,--containall")) << "short names are case-sensitive";
}

TEST(OptionFilter, HelpWantsEverything) {
  EXPECT_TRUE(OptionFilter({"--help"}).everything());
  EXPECT_TRUE(OptionFilter({"-h"}).everything());
  EXPECT_TRUE(OptionFilter({"-ch"}).everything()) << "CLI11 reads -ch as -c -h";
  EXPECT_TRUE(OptionFilter({"app.sif", "ls", "-lh"}).everything()) << "unsure, so everything";
  EXPECT_FALSE(OptionFilter({"--", "-", "app.sif"}).everything());
}
