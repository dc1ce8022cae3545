#include <gtest/gtest.h>

#include "ctr/binds.hpp"
#include "ctr/error.hpp"

using ctr::launch::BindSpec;
using ctr::launch::parseBindSpecs;
using ctr::launch::parseMountSpec;

namespace {

std::string errorOf(std::string_view spec) {
  try {
    (void)parseBindSpecs(spec);
  } catch (const ctr::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(BindSpecs, SourceOnlyBindsAtTheSamePathReadWrite) {
  EXPECT_EQ(parseBindSpecs("/scratch"), (std::vector<BindSpec>{{"/scratch", "/scratch", false, ""}}));
}

TEST(BindSpecs, SourceAndDestination) {
  EXPECT_EQ(parseBindSpecs("/data/set1:/input"),
            (std::vector<BindSpec>{{"/data/set1", "/input", false, ""}}));
}

TEST(BindSpecs, ReadOnlyAndReadWriteOptions) {
  EXPECT_EQ(parseBindSpecs("/a:/b:ro,/c:/d:rw"),
            (std::vector<BindSpec>{{"/a", "/b", true, ""}, {"/c", "/d", false, ""}}));
}

TEST(BindSpecs, CommaListKeepsOrderAndSkipsEmptyItems) {
  auto binds = parseBindSpecs(" /a , ,/b:/x,");
  ASSERT_EQ(binds.size(), 2U);
  EXPECT_EQ(binds[0].source, "/a");
  EXPECT_EQ(binds[1].destination, "/x");
}

TEST(BindSpecs, EmptyValueGivesNoBinds) { EXPECT_TRUE(parseBindSpecs("").empty()); }

TEST(BindSpecs, NormalisesDoubleSlashesAndTrailingSlash) {
  EXPECT_EQ(parseBindSpecs("//scratch//user/:/mnt/./data/"),
            (std::vector<BindSpec>{{"/scratch/user", "/mnt/data", false, ""}}));
}

TEST(BindSpecs, RefusesEmptySource) {
  EXPECT_NE(errorOf(":/dst").find("empty source"), std::string::npos);
}

TEST(BindSpecs, RefusesRelativeSource) {
  EXPECT_NE(errorOf("data:/dst").find("source 'data' is not absolute"), std::string::npos);
}

// A user's bind (a working directory given): as Apptainer, from there; the destination
// still has to be absolute.
TEST(BindSpecs, RelativeSourceOfAUserBindIsFromTheWorkingDirectory) {
  EXPECT_EQ(parseBindSpecs("data:/dst,../in/x.sif:/x:image-src=/", "/home/u/job"),
            (std::vector<BindSpec>{{"/home/u/job/data", "/dst", false, ""}, {"/home/u/in/x.sif", "/x", true, "/"}}));
  EXPECT_THROW((void)parseBindSpecs("data", "/home/u"), ctr::Error);
}

TEST(BindSpecs, RefusesRelativeDestination) {
  EXPECT_NE(errorOf("/data:dst").find("destination 'dst' is not absolute"), std::string::npos);
}

TEST(BindSpecs, RefusesUnknownOption) {
  EXPECT_NE(errorOf("/a:/b:rx").find("unknown option 'rx'"), std::string::npos);
}

TEST(BindSpecs, RefusesTooManyColons) {
  EXPECT_NE(errorOf("/a:/b:ro:x").find("too many ':'"), std::string::npos);
}

TEST(BindSpecs, RefusesBindingOverTheRoot) {
  EXPECT_NE(errorOf("/a:/").find("'/'"), std::string::npos);
  EXPECT_NE(errorOf("/a://").find("'/'"), std::string::npos);
}

TEST(BindSpecs, RefusesDotDotInDestination) {
  EXPECT_NE(errorOf("/a:/b/../etc").find("contains '..'"), std::string::npos);
}

TEST(BindSpecs, ErrorNamesTheBadSpecOnly) {
  auto message = errorOf("/good,/bad:rel");
  EXPECT_NE(message.find("'/bad:rel'"), std::string::npos) << message;
  EXPECT_EQ(message.find("/good"), std::string::npos) << message;
}

TEST(BindSpecs, PrintsInSpecSyntax) {
  EXPECT_EQ(toString(BindSpec{"/a", "/b", true, ""}), "/a:/b:ro");
  EXPECT_EQ(toString(BindSpec{"/a", "/a", false, ""}), "/a:/a");
}

TEST(BindSpecs, EscapedCommaAndColonArePartOfThePath) {
  auto binds = parseBindSpecs("/d/file\\,comma:/a\\:b,/x");
  ASSERT_EQ(binds.size(), 2U);
  EXPECT_EQ(binds[0].source, "/d/file,comma");
  EXPECT_EQ(binds[0].destination, "/a:b");
  EXPECT_EQ(binds[1].source, "/x");
}

TEST(MountSpec, BindWithDockerNamesAndQuotes) {
  auto b = parseMountSpec("type=bind,src=/opt,dst=/x,ro");
  EXPECT_EQ(b.source, "/opt");
  EXPECT_EQ(b.destination, "/x");
  EXPECT_TRUE(b.readOnly);
  b = parseMountSpec("type=bind,\"source=/a,b\",target=/y,readonly=false");
  EXPECT_EQ(b.source, "/a,b");
  EXPECT_FALSE(b.readOnly);
  EXPECT_THROW((void)parseMountSpec("type=volume,src=/a,dst=/b"), ctr::Error);
  EXPECT_THROW((void)parseMountSpec("type=bind,src=/a"), ctr::Error);
  EXPECT_THROW((void)parseMountSpec("type=bind,src=/a,dst=/b,bind-propagation=shared"), ctr::Error);
}

TEST(BindSpecs, DatasetImageSourceIsReadOnlyWithItsOptionsAfterIt) {
  auto binds = parseBindSpecs("/d/data.sqfs:/data:image-src=/,ro,/scratch,/x.sif:/x:image-src=/train//a/,/y");
  ASSERT_EQ(binds.size(), 4U);
  EXPECT_EQ(binds[0].source, "/d/data.sqfs");
  EXPECT_EQ(binds[0].imageSrc, "/");
  EXPECT_TRUE(binds[0].readOnly) << "a dataset image is always read-only";
  EXPECT_EQ(binds[1].source, "/scratch");
  EXPECT_TRUE(binds[1].imageSrc.empty());
  EXPECT_EQ(binds[2].imageSrc, "/train/a");
  EXPECT_EQ(binds[3].source, "/y");
  EXPECT_EQ(toString(binds[2]), "/x.sif:/x:image-src=/train/a");
}

TEST(BindSpecs, RefusesBadDatasetOptions) {
  EXPECT_NE(errorOf("/d.sqfs:/d:image-src=rel").find("is not an absolute path in the image"), std::string::npos);
  EXPECT_NE(errorOf("/d.sqfs:/d:image-src=/a/../b").find("contains '..'"), std::string::npos);
  EXPECT_NE(errorOf("/d.sqfs:/d:image-src=/,rw").find("mounted read-only, not rw"), std::string::npos);
  EXPECT_NE(errorOf("/d.sif:/d:image-src=/,id=2").find("id= (a SIF data partition) is not supported"), std::string::npos);
  EXPECT_NE(errorOf("/d:/d:bogus").find("unknown option 'bogus'"), std::string::npos);
}
