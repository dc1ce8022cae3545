#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "ctr/strings.hpp"

namespace {

using Lines = std::vector<std::string_view>;

TEST(Strings, SplitLinesDropsOnlyTheEmptyLineAfterAFinalNewline) {
  EXPECT_EQ(ctr::splitLines(""), Lines{});
  EXPECT_EQ(ctr::splitLines("a"), (Lines{"a"}));
  EXPECT_EQ(ctr::splitLines("a\n"), (Lines{"a"}));
  EXPECT_EQ(ctr::splitLines("a\n\nb"), (Lines{"a", "", "b"}));
  EXPECT_EQ(ctr::splitLines("/tmp\t/tmp\trw\tbind\n/home/u\ttmpfs\n"), (Lines{"/tmp\t/tmp\trw\tbind", "/home/u\ttmpfs"}));
}

TEST(Strings, SplitListTrimsAndDropsEmptyItems) {
  EXPECT_EQ(ctr::splitList(" a, ,b ,"), (Lines{"a", "b"}));
}

}  // namespace
