#include <gtest/gtest.h>
#include <unistd.h>

#include "ctr/identity.hpp"

using namespace ctr::launch;

namespace {

HostUser alice() {
  HostUser u;
  u.uid = 1000;
  u.gid = 1000;
  u.name = "alice";
  u.gecos = "Alice A";
  u.home = "/home/alice";
  u.shell = "/bin/bash";
  u.primaryGroup = {1000, "alice"};
  u.groups = {{27, "sudo"}, {5000, "hpcproj"}, {65534, ""}};
  return u;
}

constexpr std::string_view kImagePasswd =
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "ubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash\n";

constexpr std::string_view kImageGroup =
    "root:x:0:\n"
    "sudo:x:27:ubuntu\n"
    "ubuntu:x:1000:\n";

}  // namespace

TEST(IdentityFiles, ReplacesTheImageEntryWithTheSameUid) {
  auto files = buildIdentityFiles(kImagePasswd, kImageGroup, alice());
  EXPECT_EQ(files.passwd,
            "root:x:0:0:root:/root:/bin/bash\n"
            "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
            "alice:x:1000:1000:Alice A:/home/alice:/bin/bash\n");
}

TEST(IdentityFiles, ReplacesTheImageEntryWithTheSameName) {
  auto files = buildIdentityFiles("alice:x:2000:2000::/home/old:/bin/sh\nroot:x:0:0::/root:/bin/sh\n",
                                  "", alice());
  EXPECT_EQ(files.passwd,
            "root:x:0:0::/root:/bin/sh\n"
            "alice:x:1000:1000:Alice A:/home/alice:/bin/bash\n");
}

TEST(IdentityFiles, AddsTheUserToExistingGroupsAndAppendsMissingOnes) {
  auto files = buildIdentityFiles(kImagePasswd, kImageGroup, alice());
  EXPECT_EQ(files.group,
            "root:x:0:\n"
            "sudo:x:27:ubuntu,alice\n"
            "ubuntu:x:1000:alice\n"
            "hpcproj:x:5000:alice\n");
}

TEST(IdentityFiles, GroupsWithoutAHostNameAreSkipped) {
  auto files = buildIdentityFiles("", "", alice());
  EXPECT_EQ(files.group.find("65534"), std::string::npos);
}

TEST(IdentityFiles, ImageWithoutFilesGetsRootAndTheUser) {
  auto files = buildIdentityFiles("", "", alice());
  EXPECT_EQ(files.passwd,
            "root:x:0:0:root:/root:/bin/sh\n"
            "alice:x:1000:1000:Alice A:/home/alice:/bin/bash\n");
  EXPECT_EQ(files.group,
            "alice:x:1000:alice\n"
            "sudo:x:27:alice\n"
            "hpcproj:x:5000:alice\n");
}

TEST(IdentityFiles, UserAlreadyListedInAGroupIsNotAddedTwice) {
  auto files = buildIdentityFiles("", "sudo:x:27:alice\n", alice());
  EXPECT_NE(files.group.find("sudo:x:27:alice\n"), std::string::npos) << files.group;
}

TEST(IdentityFiles, CommentsAndMalformedLinesAreKept) {
  auto files = buildIdentityFiles("# comment\nbroken line\nroot:x:0:0::/root:/bin/sh\n",
                                  "# g\nodd:line\n", alice());
  EXPECT_EQ(files.passwd.rfind("# comment\nbroken line\nroot:x:0:0::/root:/bin/sh\n", 0), 0U)
      << files.passwd;
  EXPECT_EQ(files.group.rfind("# g\nodd:line\n", 0), 0U) << files.group;
}

TEST(IdentityFiles, MissingFinalNewlineIsHandled) {
  auto files = buildIdentityFiles("root:x:0:0::/root:/bin/sh", "root:x:0:", alice());
  EXPECT_EQ(files.passwd,
            "root:x:0:0::/root:/bin/sh\n"
            "alice:x:1000:1000:Alice A:/home/alice:/bin/bash\n");
  EXPECT_EQ(files.group.rfind("root:x:0:\n", 0), 0U);
}

TEST(IdentityFiles, RootUserReplacesTheImageRoot) {
  HostUser root;
  root.name = "root";
  root.home = "/root";
  root.shell = "/bin/bash";
  root.primaryGroup = {0, "root"};
  auto files = buildIdentityFiles(kImagePasswd, kImageGroup, root);
  EXPECT_EQ(files.passwd,
            "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
            "ubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash\n"
            "root:x:0:0::/root:/bin/bash\n");
  EXPECT_EQ(files.group.rfind("root:x:0:root\n", 0), 0U) << files.group;
}

TEST(HostUser, LookupDescribesTheCallingUser) {
  auto user = lookupHostUser();
  EXPECT_EQ(user.uid, getuid());
  EXPECT_EQ(user.gid, getgid());
  EXPECT_FALSE(user.name.empty());
  EXPECT_FALSE(user.home.empty());
  EXPECT_FALSE(user.shell.empty());
  EXPECT_EQ(user.primaryGroup.gid, getgid());
  for (const auto& g : user.groups) EXPECT_NE(g.gid, user.gid) << "primary group listed twice";
}
