#include <gtest/gtest.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include "ctr/identity.hpp"

using namespace ctr::launch;

namespace {

ctr::host::HostUser alice() {
  ctr::host::HostUser u;
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
  ctr::host::HostUser root;
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
  auto user = ctr::host::lookupHostUser();
  EXPECT_EQ(user.uid, getuid());
  EXPECT_EQ(user.gid, getgid());
  EXPECT_FALSE(user.name.empty());
  EXPECT_FALSE(user.home.empty());
  EXPECT_FALSE(user.shell.empty());
  EXPECT_EQ(user.primaryGroup.gid, getgid());
  for (const auto& g : user.groups) EXPECT_NE(g.gid, user.gid) << "primary group listed twice";
}

TEST(HostUser, LookupAgreesWithNss) {
  // Whichever way ctr::host::lookupHostUser took (the files directly, or NSS), it must give what
  // getpwuid/getgrgid give.
  auto user = ctr::host::lookupHostUser();
  struct passwd* pw = getpwuid(getuid());
  ASSERT_NE(pw, nullptr) << "the test user has no passwd entry";
  EXPECT_EQ(user.name, pw->pw_name);
  EXPECT_EQ(user.gecos, pw->pw_gecos);
  EXPECT_EQ(user.home, pw->pw_dir);
  EXPECT_EQ(user.shell, *pw->pw_shell ? pw->pw_shell : "/bin/sh");
  struct group* gr = getgrgid(getgid());
  EXPECT_EQ(user.primaryGroup.name, gr ? gr->gr_name : "");
  for (const auto& g : user.groups) {
    struct group* e = getgrgid(g.gid);
    EXPECT_EQ(g.name, e ? e->gr_name : "") << "gid " << g.gid;
  }
}

TEST(NsswitchFiles, FilesFirstWithTheDefaultActionAnswers) {
  EXPECT_TRUE(ctr::host::filesAnswerFirst("passwd: files\n", "passwd"));
  EXPECT_TRUE(ctr::host::filesAnswerFirst("# c\npasswd:         files systemd\ngroup: files\n", "passwd"));
  EXPECT_TRUE(ctr::host::filesAnswerFirst("passwd:files sss # comment", "passwd"));
  EXPECT_TRUE(ctr::host::filesAnswerFirst("passwd: ldap\ngroup:\tfiles\tldap\n", "group"));
}

TEST(NsswitchFiles, AnythingElseAsksNss) {
  EXPECT_FALSE(ctr::host::filesAnswerFirst("", "passwd")) << "no line: glibc's built-in default";
  EXPECT_FALSE(ctr::host::filesAnswerFirst("group: files\n", "passwd"));
  EXPECT_FALSE(ctr::host::filesAnswerFirst("passwd: sss files\n", "passwd"));
  EXPECT_FALSE(ctr::host::filesAnswerFirst("passwd: compat\n", "passwd"));
  EXPECT_FALSE(ctr::host::filesAnswerFirst("passwd: files [SUCCESS=continue] ldap\n", "passwd"));
  EXPECT_FALSE(ctr::host::filesAnswerFirst("passwd: files\npasswd: ldap\n", "passwd")) << "said twice";
  EXPECT_FALSE(ctr::host::filesAnswerFirst("#passwd: files\n", "passwd"));
  EXPECT_FALSE(ctr::host::filesAnswerFirst("passwd: filesx\n", "passwd"));
  EXPECT_FALSE(ctr::host::filesAnswerFirst("passwd:\n", "passwd"));
}

namespace {

// What glibc's parser gives for `uid` reading the whole text line after line: the
// reference ctr::host::passwdEntryFromText must agree with.
std::string referencePasswdName(const std::string& text, uid_t uid) {
  std::string copy = text;
  FILE* f = fmemopen(copy.data(), copy.size(), "r");
  struct passwd entry {};
  char buf[4096];
  struct passwd* result = nullptr;
  std::string name = "<none>";
  while (fgetpwent_r(f, &entry, buf, sizeof buf, &result) == 0 && result) {
    if (entry.pw_uid == uid) {
      name = entry.pw_name;
      break;
    }
  }
  fclose(f);
  return name;
}

std::string passwdName(const std::string& text, uid_t uid) {
  ctr::host::HostUser user;
  return ctr::host::passwdEntryFromText(text, uid, user) ? user.name : "<none>";
}

}  // namespace

TEST(EtcFiles, PasswdEntryAsGlibcReadsIt) {
  const std::string text =
      "# alice:x:1000:1000::/home/c:/bin/sh\n"
      "broken:x:1000\n"
      "   \n"
      "zero:x:01000:1000:Zero:/home/zero:/bin/sh\n"
      "alice:x:1000:1000:Alice:/home/alice:/bin/bash\n"
      "bob:x:1001:1001::/home/bob:/bin/sh\n"
      "bob2:x:1001:1001::/home/bob2:/bin/sh";
  for (uid_t uid : {1000U, 1001U, 1002U, 0U}) EXPECT_EQ(passwdName(text, uid), referencePasswdName(text, uid)) << uid;
  ctr::host::HostUser user;
  ASSERT_TRUE(ctr::host::passwdEntryFromText("alice:x:1000:1000:Alice A:/home/alice:/bin/bash\n", 1000, user));
  EXPECT_EQ(user.name, "alice");
  EXPECT_EQ(user.gecos, "Alice A");
  EXPECT_EQ(user.home, "/home/alice");
  EXPECT_EQ(user.shell, "/bin/bash");
  EXPECT_FALSE(ctr::host::passwdEntryFromText("", 1000, user));
}

TEST(EtcFiles, GroupNamesFirstEntryPerGid) {
  std::map<gid_t, std::string> names{{27, ""}, {1000, ""}, {5000, ""}, {7, "kept"}};
  ctr::host::groupNamesFromText("#sudo:x:27:\nsudo:x:27:alice\nusers:x:1000:\nother:x:1000:\nlp:x:7:\n", names);
  EXPECT_EQ(names[27], "sudo");
  EXPECT_EQ(names[1000], "users") << "the first entry";
  EXPECT_EQ(names[5000], "") << "not in the file: left for NSS";
  EXPECT_EQ(names[7], "kept") << "a name already known is kept";
}

TEST(IdentityFiles, EachFileAloneIsTheOneBuiltWithTheOther) {
  const auto both = buildIdentityFiles(kImagePasswd, kImageGroup, alice());
  EXPECT_EQ(identityFileText(IdentityFile::Passwd, kImagePasswd, alice()), both.passwd);
  EXPECT_EQ(identityFileText(IdentityFile::Group, kImageGroup, alice()), both.group);
  EXPECT_STREQ(identityFilePath(IdentityFile::Passwd), "/etc/passwd");
  EXPECT_STREQ(identityFilePath(IdentityFile::Group), "/etc/group");
}
