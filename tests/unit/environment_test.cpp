#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "ctr/environment.hpp"
#include "ctr/error.hpp"

using namespace ctr::launch;

namespace {

Environment compute(std::vector<std::string> host, bool cleanEnv = false) {
  EnvironmentInputs in;
  in.host = std::move(host);
  in.cleanEnv = cleanEnv;
  return computeEnvironment(in);
}

std::string errorOf(auto&& body) {
  try {
    body();
  } catch (const ctr::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Environment, PassesHostVariablesThrough) {
  auto env = compute({"FOO=bar", "LANG=en_US.UTF-8", "EMPTY="});
  EXPECT_EQ(env.vars.at("FOO"), "bar");
  EXPECT_EQ(env.vars.at("LANG"), "en_US.UTF-8");
  EXPECT_EQ(env.vars.at("EMPTY"), "");
}

TEST(Environment, HostPathIsReplacedByTheDefaultContainerPath) {
  auto env = compute({"PATH=/home/u/bin:/usr/bin"});
  EXPECT_EQ(env.vars.at("PATH"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
}

TEST(Environment, HostLdLibraryPathIsNotPassed) {
  auto env = compute({"LD_LIBRARY_PATH=/opt/host/lib"});
  EXPECT_FALSE(env.vars.contains("LD_LIBRARY_PATH"));
}

TEST(Environment, LibraryDirIsAppendedToLdLibraryPath) {
  EnvironmentInputs in;
  in.host = {"LD_LIBRARY_PATH=/opt/host/lib"};
  in.libraryDir = "/.singularity.d/libs";
  EXPECT_EQ(computeEnvironment(in).vars.at("LD_LIBRARY_PATH"), "/.singularity.d/libs");
  in.cli = {{"LD_LIBRARY_PATH", "/opt/app/lib"}};
  EXPECT_EQ(computeEnvironment(in).vars.at("LD_LIBRARY_PATH"), "/opt/app/lib:/.singularity.d/libs");
}

TEST(Environment, CtrOwnVariablesAreNotPassed) {
  auto env = compute({"CTR_BIND=/scratch", "CTR_CONFIG=/x", "CTRX=kept"});
  EXPECT_FALSE(env.vars.contains("CTR_BIND"));
  EXPECT_FALSE(env.vars.contains("CTR_CONFIG"));
  EXPECT_EQ(env.vars.at("CTRX"), "kept");
}

TEST(Environment, CtrenvPrefixInjectsTheVariable) {
  auto env = compute({"CTRENV_FOO=inside", "FOO=host"});
  EXPECT_EQ(env.vars.at("FOO"), "inside");
  EXPECT_FALSE(env.vars.contains("CTRENV_FOO"));
  EXPECT_EQ(env.userSet, std::vector<std::string>{"FOO"});
}

TEST(Environment, CtrenvBeatsApptainerenvBeatsSingularityenvWhateverTheOrder) {
  auto env = compute({"CTRENV_A=ctr", "APPTAINERENV_A=app", "SINGULARITYENV_A=sing",
                      "SINGULARITYENV_B=sing", "APPTAINERENV_B=app"});
  EXPECT_EQ(env.vars.at("A"), "ctr");
  EXPECT_EQ(env.vars.at("B"), "app");
  EXPECT_FALSE(env.vars.contains("APPTAINERENV_A"));
}

TEST(Environment, InjectionWithInvalidNameIsIgnored) {
  auto env = compute({"CTRENV_=x", "CTRENV_A;B=x"});
  EXPECT_TRUE(env.userSet.empty());
}

TEST(Environment, CleanenvKeepsOnlyTermProxiesAndMpiWiring) {
  auto env = compute({"FOO=bar", "TERM=xterm", "http_proxy=p", "NO_PROXY=n", "LANG=de_DE",
                      "OMPI_COMM_WORLD_RANK=3", "PMIX_RANK=3", "PMI_FD=5", "SLURM_JOB_ID=9",
                      "HOME=/home/u", "CTRENV_X=1"},
                     /*cleanEnv=*/true);
  EXPECT_FALSE(env.vars.contains("FOO"));
  EXPECT_EQ(env.vars.at("TERM"), "xterm");
  EXPECT_EQ(env.vars.at("http_proxy"), "p");
  EXPECT_EQ(env.vars.at("NO_PROXY"), "n");
  EXPECT_EQ(env.vars.at("LANG"), "C");
  EXPECT_EQ(env.vars.at("OMPI_COMM_WORLD_RANK"), "3");
  EXPECT_EQ(env.vars.at("PMIX_RANK"), "3");
  EXPECT_EQ(env.vars.at("PMI_FD"), "5");
  EXPECT_EQ(env.vars.at("SLURM_JOB_ID"), "9");
  EXPECT_EQ(env.vars.at("X"), "1");
  EXPECT_EQ(env.vars.at("HOME"), "/home/u");
}

TEST(Environment, MpiVariablesPassUnchanged) {
  auto env = compute({"PMIX_SERVER_URI41=pmix-server.1;tcp4://127.0.0.1:4242",
                      "OMPI_MCA_btl_vader_single_copy_mechanism=none"});
  EXPECT_EQ(env.vars.at("PMIX_SERVER_URI41"), "pmix-server.1;tcp4://127.0.0.1:4242");
  EXPECT_EQ(env.vars.at("OMPI_MCA_btl_vader_single_copy_mechanism"), "none");
}

TEST(Environment, PrecedenceIsHostThenImageThenEnvFileThenEnvOption) {
  EnvironmentInputs in;
  in.host = {"A=host", "B=host", "C=host", "D=host", "CTRENV_C=ctrenv"};
  in.image = {{"B", "image"}, {"C", "image"}, {"D", "image"}, {"PATH", "/opt/conda/bin:/usr/bin"}};
  in.envFiles = {{"C", "file"}, {"D", "file"}};
  in.cli = {{"D", "cli"}};
  auto env = computeEnvironment(in);
  EXPECT_EQ(env.vars.at("A"), "host");
  EXPECT_EQ(env.vars.at("B"), "image");
  EXPECT_EQ(env.vars.at("C"), "file");
  EXPECT_EQ(env.vars.at("D"), "cli");
  EXPECT_EQ(env.vars.at("PATH"), "/opt/conda/bin:/usr/bin");
  EXPECT_EQ(env.userSet, (std::vector<std::string>{"C", "D"}));
}

TEST(Environment, HomeIsTheContainerHomeAndCannotBeOverridden) {
  EnvironmentInputs in;
  in.host = {"HOME=/home/host"};
  in.home = "/home/u";
  in.cli = {{"HOME", "/elsewhere"}};
  EXPECT_EQ(computeEnvironment(in).vars.at("HOME"), "/home/u");
}

TEST(Environment, PrependAndAppendPathExtendThePath) {
  EnvironmentInputs in;
  in.cli = {{"PREPEND_PATH", "/opt/a/bin"}, {"APPEND_PATH", "/opt/z/bin"}};
  auto env = computeEnvironment(in);
  EXPECT_EQ(env.vars.at("PATH"), "/opt/a/bin:" + std::string(kDefaultContainerPath) + ":/opt/z/bin");
  EXPECT_FALSE(env.vars.contains("PREPEND_PATH"));
  EXPECT_EQ(env.userSet, std::vector<std::string>{"PATH"});
}

TEST(Environment, SetsContainerAndName) {
  EnvironmentInputs in;
  in.imagePath = "/scratch/images/app.sif";
  in.host = {"CTR_CONTAINER=/spoofed"};
  auto env = computeEnvironment(in);
  EXPECT_EQ(env.vars.at("CTR_CONTAINER"), "/scratch/images/app.sif");
  EXPECT_EQ(env.vars.at("CTR_NAME"), "app.sif");
}

TEST(Environment, EnvpIsSortedAndStable) {
  auto envp = toEnvp(compute({"ZED=1", "ALPHA=2", "MID=3"}));
  EXPECT_TRUE(std::is_sorted(envp.begin(), envp.end()));
  EXPECT_EQ(envp, toEnvp(compute({"MID=3", "ZED=1", "ALPHA=2"})));
}

TEST(Environment, MalformedHostEntriesAreIgnored) {
  auto env = compute({"NOEQUALS", "=novalue", "OK=1"});
  EXPECT_FALSE(env.vars.contains("NOEQUALS"));
  EXPECT_EQ(env.vars.at("OK"), "1");
}

TEST(EnvOption, ParsesSingleAndCommaListValues) {
  EXPECT_EQ(parseEnvOption("A=1"), (std::vector<EnvVar>{{"A", "1"}}));
  EXPECT_EQ(parseEnvOption("A=1,B=2"), (std::vector<EnvVar>{{"A", "1"}, {"B", "2"}}));
  EXPECT_EQ(parseEnvOption("A="), (std::vector<EnvVar>{{"A", ""}}));
  EXPECT_EQ(parseEnvOption("URL=http://h/?a=b"), (std::vector<EnvVar>{{"URL", "http://h/?a=b"}}));
}

TEST(EnvOption, ItemWithoutEqualsContinuesThePreviousValue) {
  EXPECT_EQ(parseEnvOption("LIST=a,b,C=3"), (std::vector<EnvVar>{{"LIST", "a,b"}, {"C", "3"}}));
}

TEST(EnvOption, RefusesInvalidNames) {
  EXPECT_NE(errorOf([] { (void)parseEnvOption("1A=x"); }).find("'1A' is not a valid variable name"),
            std::string::npos);
  EXPECT_NE(errorOf([] { (void)parseEnvOption("=x"); }).find("not a valid variable name"),
            std::string::npos);
  EXPECT_NE(errorOf([] { (void)parseEnvOption("novalue"); }).find("is not NAME=VALUE"),
            std::string::npos);
}

TEST(EnvFile, ParsesAssignmentsCommentsExportAndQuotes) {
  auto vars = parseEnvFile(
      "# comment\n"
      "\n"
      "A=1\n"
      "export B = two words \n"
      "C=\"quoted # not a comment\"\n"
      "D='single $HOME'\n"
      "E=\n",
      "my.env");
  EXPECT_EQ(vars, (std::vector<EnvVar>{{"A", "1"},
                                       {"B", "two words"},
                                       {"C", "quoted # not a comment"},
                                       {"D", "single $HOME"},
                                       {"E", ""}}));
}

TEST(EnvFile, BadLineErrorNamesFileAndLine) {
  EXPECT_EQ(errorOf([] { (void)parseEnvFile("A=1\n# c\nnot an assignment\n", "my.env"); }),
            "my.env:3: expected NAME=VALUE, got 'not an assignment'");
  EXPECT_EQ(errorOf([] { (void)parseEnvFile("B-C=1\n", "my.env"); }),
            "my.env:1: 'B-C' is not a valid variable name");
  EXPECT_EQ(errorOf([] { (void)parseEnvFile("Q=\"open\n", "my.env"); }),
            "my.env:1: unterminated quote in the value of Q");
}

TEST(EnvScripts, ArgvSourcesScriptsThenExecsTheCommand) {
  auto argv = envScriptArgv({"python3", "train.py"});
  ASSERT_EQ(argv.size(), 6U);
  EXPECT_EQ(argv[0], "/bin/sh");
  EXPECT_EQ(argv[1], "-c");
  EXPECT_EQ(argv[2],
            "for f in /.singularity.d/env/*.sh; do [ -r \"$f\" ] && . \"$f\"; done; unset f; "
            "exec \"$@\"");
  EXPECT_EQ(argv[3], "ctr-env");
  EXPECT_EQ(argv[4], "python3");
  EXPECT_EQ(argv[5], "train.py");
}

TEST(EnvScripts, ReexportsUserValuesQuotedForTheShell) {
  auto argv = envScriptArgv({"true"}, {{"A", "it's $x"}});
  EXPECT_NE(argv[2].find("export A='it'\\''s $x'; exec"), std::string::npos) << argv[2];
  EXPECT_THROW((void)envScriptArgv({"true"}, {{"A;rm", "x"}}), ctr::Error);
}

TEST(EnvScripts, ShellRunsScriptsAndKeepsReexportedValues) {
  // End to end with the host's /bin/sh: the script snippet must be valid shell. The env
  // directory does not exist here, so the glob stays literal and [ -r ] skips it.
  auto argv = envScriptArgv({"/bin/sh", "-c", "test \"$A\" = \"it's\" && test \"$#\" = 0"},
                            {{"A", "it's"}});
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}
