#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "ctr/hash.hpp"
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

TEST(Strings, HexIsTwoLowercaseDigitsPerByteMostSignificantFirst) {
  const std::uint8_t bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(ctr::toHex(bytes), "000fa5ff");
  EXPECT_EQ(ctr::toHex({}), "");
  EXPECT_EQ(ctr::toHex16(0x0123456789abcdefULL), "0123456789abcdef");
  EXPECT_EQ(ctr::toHex16(42), "000000000000002a");
}
