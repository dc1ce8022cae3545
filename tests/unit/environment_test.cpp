#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "ctr/environment.hpp"
#include "ctr/env_script_interpreter.hpp"
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
  in.libraryDirs = {"/.singularity.d/libs"};
  EXPECT_EQ(computeEnvironment(in).vars.at("LD_LIBRARY_PATH"), "/.singularity.d/libs");
  in.cli = {{"LD_LIBRARY_PATH", "/opt/app/lib"}};
  EXPECT_EQ(computeEnvironment(in).user.vars,
            (std::vector<EnvVar>{{"LD_LIBRARY_PATH", "/opt/app/lib:/.singularity.d/libs"}}));
}

TEST(Environment, CtrOwnVariablesAreNotPassed) {
  auto env = compute({"CTR_BIND=/scratch", "CTR_CONFIG=/x", "CTRX=kept"});
  EXPECT_FALSE(env.vars.contains("CTR_BIND"));
  EXPECT_FALSE(env.vars.contains("CTR_CONFIG"));
  EXPECT_EQ(env.vars.at("CTRX"), "kept");
}

TEST(Environment, CtrenvPrefixInjectsTheVariable) {
  auto env = compute({"CTRENV_FOO=inside", "FOO=host"});
  EXPECT_EQ(env.vars.at("FOO"), "host");  // before the image's scripts
  EXPECT_FALSE(env.vars.contains("CTRENV_FOO"));
  EXPECT_EQ(env.user.vars, (std::vector<EnvVar>{{"FOO", "inside"}}));
}

TEST(Environment, CtrenvBeatsApptainerenvBeatsSingularityenvWhateverTheOrder) {
  auto env = compute({"CTRENV_A=ctr", "APPTAINERENV_A=app", "SINGULARITYENV_A=sing",
                      "SINGULARITYENV_B=sing", "APPTAINERENV_B=app"});
  EXPECT_EQ(env.user.vars, (std::vector<EnvVar>{{"A", "ctr"}, {"B", "app"}}));
  EXPECT_FALSE(env.vars.contains("APPTAINERENV_A"));
}

TEST(Environment, InjectionWithInvalidNameIsIgnored) {
  auto env = compute({"CTRENV_=x", "CTRENV_A;B=x"});
  EXPECT_TRUE(env.user.empty());
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
  EXPECT_EQ(env.user.vars, (std::vector<EnvVar>{{"X", "1"}}));
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
  EXPECT_EQ(env.vars.at("C"), "image");
  EXPECT_EQ(env.vars.at("PATH"), "/opt/conda/bin:/usr/bin");
  // The user's settings, applied after the image's scripts: the last one of a name wins.
  EXPECT_EQ(env.user.vars, (std::vector<EnvVar>{{"C", "file"}, {"D", "cli"}}));
}

TEST(Environment, HomeIsTheContainerHomeAndCannotBeOverridden) {
  EnvironmentInputs in;
  in.host = {"HOME=/home/host"};
  in.home = "/home/u";
  in.cli = {{"HOME", "/elsewhere"}};
  auto env = computeEnvironment(in);
  EXPECT_EQ(env.vars.at("HOME"), "/home/u");
  EXPECT_TRUE(env.user.empty());
  ASSERT_EQ(env.warnings.size(), 1U);
  EXPECT_EQ(env.warnings[0], "HOME cannot be set with --env: use --home (ignored)");
}

TEST(Environment, PrependAndAppendPathExtendThePath) {
  EnvironmentInputs in;
  in.cli = {{"PREPEND_PATH", "/opt/a/bin"}, {"APPEND_PATH", "/opt/z/bin"}};
  auto env = computeEnvironment(in);
  EXPECT_EQ(env.vars.at("PATH"), std::string(kDefaultContainerPath));  // applied after the scripts
  EXPECT_EQ(env.user.prependPath, "/opt/a/bin");
  EXPECT_EQ(env.user.appendPath, "/opt/z/bin");
  EXPECT_FALSE(env.vars.contains("PREPEND_PATH"));
  EXPECT_TRUE(env.user.vars.empty());
}

TEST(Environment, SetsContainerAndName) {
  EnvironmentInputs in;
  in.imagePath = "/scratch/images/app.sif";
  in.host = {"CTR_CONTAINER=/spoofed"};
  auto env = computeEnvironment(in);
  EXPECT_EQ(env.vars.at("CTR_CONTAINER"), "/scratch/images/app.sif");
  EXPECT_EQ(env.vars.at("CTR_NAME"), "app.sif");
  EXPECT_EQ(env.vars.at("APPTAINER_CONTAINER"), "/scratch/images/app.sif");
  EXPECT_EQ(env.vars.at("SINGULARITY_NAME"), "app.sif");
  EXPECT_EQ(env.fixed.size(), 6U);
}

TEST(Environment, AnInstanceIsNamedAsApptainerNamesIt) {
  EnvironmentInputs in;
  in.imagePath = "/scratch/images/app.sif";
  EXPECT_FALSE(computeEnvironment(in).vars.contains("APPTAINER_INSTANCE"));
  in.instance = "svc1";
  in.host = {"APPTAINER_INSTANCE=spoofed"};
  auto env = computeEnvironment(in);
  EXPECT_EQ(env.vars.at("APPTAINER_INSTANCE"), "svc1");
  EXPECT_EQ(env.vars.at("SINGULARITY_INSTANCE"), "svc1");
}

TEST(Environment, ApptainerSettingsAndNoEnvNamesAreNotPassed) {
  EnvironmentInputs in;
  in.host = {"APPTAINER_BIND=/x", "SINGULARITY_CONTAINER=/spoof", "FOO=1", "BAR=2", "BASH_FUNC_ml%%=() {}"};
  in.noEnv = {"BAR"};
  auto env = computeEnvironment(in);
  EXPECT_FALSE(env.vars.contains("APPTAINER_BIND"));
  EXPECT_FALSE(env.vars.contains("SINGULARITY_CONTAINER"));
  EXPECT_FALSE(env.vars.contains("BAR"));
  EXPECT_FALSE(env.vars.contains("BASH_FUNC_ml%%"));
  EXPECT_EQ(env.vars.at("FOO"), "1");
  in.host.push_back("APPTAINERENV_BAR=set");  // --no-env does not stop an explicit setting
  in.host.push_back("APPTAINERENV_APPTAINER_APPNAME=x");
  env = computeEnvironment(in);
  EXPECT_EQ(env.user.vars, (std::vector<EnvVar>{{"BAR", "set"}}));
  EXPECT_EQ(env.warnings, std::vector<std::string>{"APPTAINER_APPNAME cannot be set with APPTAINERENV_APPTAINER_APPNAME (ignored)"});
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

TEST(EnvFile, ShellQuotingDropsTheBackslashesTheShellWould) {
  // Apptainer's e2e "AppendLiteralDefaultPath": PATH="\$PATH:/" leaves $PATH to the container.
  auto vars = parseEnvFile(
      "PATH=\"\\$PATH:/\"\n"
      "A=\"a\\\"b\\\\c\\d\"\n"  // "a\"b\\c\d": \d is kept in double quotes
      "B='\\$x'\n"                  // nothing is special in single quotes
      "C=x\\$y\\z\n",              // outside quotes a backslash escapes any character
      "my.env", EnvFileQuoting::Shell);
  EXPECT_EQ(vars, (std::vector<EnvVar>{{"PATH", "$PATH:/"}, {"A", "a\"b\\c\\d"}, {"B", "\\$x"}, {"C", "x$yz"}}));
  // The SIF environment object's values stay as written.
  EXPECT_EQ(parseEnvFile("C=x\\$y\n", "sif"), (std::vector<EnvVar>{{"C", "x\\$y"}}));
}

TEST(EnvFile, BadLineErrorNamesFileAndLine) {
  EXPECT_EQ(errorOf([] { (void)parseEnvFile("A=1\n# c\nnot an assignment\n", "my.env"); }),
            "my.env:3: expected NAME=VALUE, got 'not an assignment'");
  EXPECT_EQ(errorOf([] { (void)parseEnvFile("B-C=1\n", "my.env"); }),
            "my.env:1: 'B-C' is not a valid variable name");
  EXPECT_EQ(errorOf([] { (void)parseEnvFile("Q=\"open\n", "my.env"); }),
            "my.env:1: unterminated quote in the value of Q");
}

// the env program: one script text, run by ctr's interpreter or by /bin/sh

namespace {

// A scratch directory with env scripts, removed at the end.
struct ScriptDir {
  std::string path;
  ScriptDir() {
    char tmpl[] = "/tmp/ctr-envprog.XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~ScriptDir() { std::filesystem::remove_all(path); }
  std::string add(const std::string& name, const std::string& text) {
    std::ofstream(path + "/" + name) << text;
    return path + "/" + name;
  }
};

ShellHost realFiles() {
  ShellHost host;
  host.readFile = [](const std::string& p) -> std::optional<std::string> {
    std::ifstream in(p);
    if (!in) return std::nullopt;
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  host.testFile = [](char op, const std::string& p) {
    struct stat st {};
    if (op == 'r') return access(p.c_str(), R_OK) == 0;
    if (op == 'd') return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    return stat(p.c_str(), &st) == 0;
  };
  return host;
}

// What the interpreter gives (nullopt: declined), and what /bin/sh gives, both started
// from `initial`. Variables the shell itself adds (PWD, SHLVL, _) are left out.
std::optional<std::map<std::string, std::string>> interpreted(const std::string& script,
                                                              const std::map<std::string, std::string>& initial) {
  ShellVars vars;
  for (const auto& [k, v] : initial) vars.vars[k] = {v, true, true};
  auto host = realFiles();
  if (!interpretEnvScript(script, vars, &host).empty()) return std::nullopt;
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : vars.vars)
    if (v.set && v.exported && k != "PWD") out[k] = v.value;
  return out;
}

std::map<std::string, std::string> shell(const std::string& script, const std::map<std::string, std::string>& initial) {
  auto argv = envProgramArgv(script, {"/usr/bin/env", "-0"});
  int out[2];
  EXPECT_EQ(pipe(out), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    std::vector<std::string> envs;
    for (const auto& [k, v] : initial) envs.push_back(k + "=" + v);
    std::vector<char*> cargv, cenv;
    for (auto& a : argv) cargv.push_back(a.data());
    for (auto& e : envs) cenv.push_back(e.data());
    cargv.push_back(nullptr);
    cenv.push_back(nullptr);
    execve("/bin/sh", cargv.data(), cenv.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << script;
  std::map<std::string, std::string> env;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\0', pos);
    std::string kv = text.substr(pos, end - pos);
    pos = end + 1;
    auto eq = kv.find('=');
    std::string k = kv.substr(0, eq);
    if (k != "PWD" && k != "SHLVL" && k != "_" && k != "OLDPWD") env[k] = kv.substr(eq + 1);
  }
  return env;
}

const std::map<std::string, std::string> kInitial = {
    {"PATH", std::string(kDefaultContainerPath)}, {"HOME", "/home/u"}, {"FROM_HOST", "h"}};

}  // namespace

TEST(EnvProgram, UserValuesComeAfterNinetyNineBaseAndPathChangesAfterAllScripts) {
  EnvProgram p;
  p.scripts = {"/.singularity.d/env/90-environment.sh", "/.singularity.d/env/99-base.sh",
               "/.singularity.d/env/99-runtimevars.sh"};
  p.user.vars = {{"A", "1"}};
  p.user.appendPath = "/foo";
  const auto s = envProgramScript(p);
  const auto base = s.find("99-base.sh"), user = s.find("export A="), runtime = s.find("99-runtimevars.sh"),
             append = s.find("PATH=\"$PATH:$__ctr_append_path\"");
  ASSERT_NE(user, std::string::npos);
  EXPECT_LT(base, user);
  EXPECT_LT(user, runtime);
  EXPECT_LT(runtime, append);
}

TEST(EnvProgram, LegacyEnvironmentFileComesBeforeTheUserValues) {
  EnvProgram p;
  p.scripts = {"/environment"};
  p.user.vars = {{"A", "1"}};
  const auto s = envProgramScript(p);
  EXPECT_LT(s.find(". '/environment'"), s.find("export A="));
}

TEST(EnvProgram, InvalidNameIsRefused) {
  EnvProgram p;
  p.user.vars = {{"A;rm", "x"}};
  EXPECT_THROW((void)envProgramScript(p), ctr::Error);
}

// Crafted cases: wherever the interpreter applies the program, /bin/sh gives the same
// environment; where it declines (command substitution), the shell result is checked.
TEST(EnvProgram, InterpreterAndShellAgree) {
  ScriptDir dir;
  EnvProgram p;
  p.scripts = {dir.add("01-base.sh", "# nothing\n"),
               dir.add("90-environment.sh", "export PATH=\"$PATH:/opt/tool/bin\"\nexport IMG=from-image\n"),
               dir.add("95-apps.sh", "if [ -n \"${APPNAME:-}\" ]; then . " + dir.path + "/app.env; fi\n"),
               dir.add("99-base.sh",
                       "if [ -z \"${LD_LIBRARY_PATH:-}\" ]; then LD_LIBRARY_PATH=/.singularity.d/libs; else "
                       "LD_LIBRARY_PATH=\"$LD_LIBRARY_PATH:/.singularity.d/libs\"; fi\nexport LD_LIBRARY_PATH\n"),
               dir.add("99-runtimevars.sh", "export LATE=\"${A:-unset}\"\n")};
  dir.add("app.env", "export APPVAR=from-app\n");
  p.user.vars = {{"A", "$HOME/a"},        {"B", "${IMG}-b"},           {"C", "\\$lit"},
                 {"D", "it's \"q\""},     {"E", "x\\\\y"},
                 {"LD_LIBRARY_PATH", "/opt/lib:/.singularity.d/libs"}, {"PREPEND_LD_LIBRARY_PATH", "/pre"},
                 {"EMPTY", ""},           {"F", "${UNSET_THING:-dflt}"}};
  p.user.prependPath = "/first";
  p.user.appendPath = "$HOME/bin";
  p.fixed = {{"CTR_NAME", "app.sif"}, {"APPTAINER_NAME", "app.sif"}};
  p.uid = 1234;
  p.gid = 99;
  auto initial = kInitial;
  initial["APPNAME"] = "tool";  // as --app sets it: before the scripts
  for (bool evaluate : {true, false}) {
    p.user.evaluate = evaluate;
    const auto script = envProgramScript(p);
    auto mine = interpreted(script, initial);
    ASSERT_TRUE(mine) << script;
    EXPECT_EQ(*mine, shell(script, initial)) << script;
    if (evaluate) {
      EXPECT_EQ(mine->at("A"), "/home/u/a");
      EXPECT_EQ(mine->at("B"), "from-image-b");
      EXPECT_EQ(mine->at("C"), "$lit");
      EXPECT_EQ(mine->at("D"), "it's \"q\"");
      EXPECT_EQ(mine->at("F"), "dflt");
      EXPECT_EQ(mine->at("LATE"), "/home/u/a");
      EXPECT_EQ(mine->at("PATH"), "/first:" + std::string(kDefaultContainerPath) + ":/opt/tool/bin:/home/u/bin");
      EXPECT_EQ(mine->at("LD_LIBRARY_PATH"), "/pre:/opt/lib:/.singularity.d/libs");
    } else {
      EXPECT_EQ(mine->at("A"), "$HOME/a");
      EXPECT_EQ(mine->at("C"), "\\$lit");
    }
    EXPECT_EQ(mine->at("APPVAR"), "from-app");
    EXPECT_EQ(mine->at("PS1"), "Apptainer> ");
    EXPECT_EQ(mine->at("APPTAINER_ENVIRONMENT"), "/.singularity.d/env/91-environment.sh");
  }
}

TEST(EnvProgram, PathOverrideWinsAndPromptCommandIsExtended) {
  EnvProgram p;
  p.user.path = "$PATH:/x";
  p.fixed = {{"CTR_NAME", "a"}};
  auto initial = kInitial;
  initial["PROMPT_COMMAND"] = "history -a";
  initial["PS1"] = "$ ";
  p.ps1 = "$ ";
  const auto script = envProgramScript(p);
  auto mine = interpreted(script, initial);
  ASSERT_TRUE(mine);
  EXPECT_EQ(*mine, shell(script, initial));
  EXPECT_EQ(mine->at("PATH"), std::string(kDefaultContainerPath) + ":/x");
  EXPECT_EQ(mine->at("PROMPT_COMMAND"),
            "history -a; PROMPT_COMMAND=\"${PROMPT_COMMAND%%; PROMPT_COMMAND=*}\"; PS1=\"$ \"");
}

TEST(EnvProgram, CommandSubstitutionGoesToTheShell) {
  EnvProgram p;
  p.user.vars = {{"WHO", "$(echo me)"}, {"ESC", "\\$(echo me)"}, {"ID", "$UID:$GID"}};
  p.uid = 4321;
  p.gid = 55;
  const auto script = envProgramScript(p);
  EXPECT_FALSE(interpreted(script, kInitial));
  auto sh = shell(script, kInitial);
  EXPECT_EQ(sh.at("WHO"), "me");
  EXPECT_EQ(sh.at("ESC"), "$(echo me)");
  EXPECT_EQ(sh.at("ID"), "4321:55");  // dash has no $UID: the program sets it
  p.user.vars = {{"ID", "$UID:$GID"}};
  EXPECT_EQ(interpreted(envProgramScript(p), kInitial)->at("ID"), "4321:55");
}

// --image-env-first (pyxis's rule): Docker's ENV, as Apptainer writes it
// (`V="${V:-default}"`), gives the image's value even where the host has one; host
// variables the image does not set come back; the launcher's wiring and the user's own
// settings are not the image's to change.
TEST(EnvProgram, ImageFirstGivesTheImageItsOwnValues) {
  ScriptDir dir;
  EnvironmentInputs in;
  in.host = {"CUDA_VERSION=11.0", "MINE=job's value", "SLURM_PROCID=3", "OMPI_X=wire", "EMPTY=", "SET_BY_USER=host"};
  in.imageFirst = true;
  in.cli = {{"SET_BY_USER", "from --env"}};
  Environment env = computeEnvironment(in);
  EXPECT_FALSE(env.vars.contains("CUDA_VERSION"));
  EXPECT_FALSE(env.vars.contains("MINE"));
  EXPECT_EQ(env.vars.at("SLURM_PROCID"), "3");
  EXPECT_EQ(env.vars.at("OMPI_X"), "wire");
  EnvProgram p;
  p.scripts = {dir.add("10-docker2singularity.sh",
                       "export CUDA_VERSION=\"${CUDA_VERSION:-\"12.4.0\"}\"\nexport SLURM_PROCID=\"${SLURM_PROCID:-\"0\"}\"\n"
                       "export EMPTY=\"${EMPTY:-\"image\"}\"\n"),
               dir.add("99-base.sh", "# nothing\n")};
  p.user = env.user;
  p.hostFallback = env.hostFallback;
  std::map<std::string, std::string> initial(kInitial);
  for (const auto& [k, v] : env.vars) initial[k] = v;
  const auto script = envProgramScript(p);
  auto mine = interpreted(script, initial);
  ASSERT_TRUE(mine) << script;
  EXPECT_EQ(*mine, shell(script, initial)) << script;
  EXPECT_EQ(mine->at("CUDA_VERSION"), "12.4.0");
  EXPECT_EQ(mine->at("MINE"), "job's value");
  EXPECT_EQ(mine->at("SLURM_PROCID"), "3");
  EXPECT_EQ(mine->at("EMPTY"), "image");
  EXPECT_EQ(mine->at("SET_BY_USER"), "from --env");
  // Without the rule, Apptainer's: the host's value wins.
  in.imageFirst = false;
  env = computeEnvironment(in);
  EXPECT_TRUE(env.hostFallback.empty());
  p.hostFallback.clear();
  initial = kInitial;
  for (const auto& [k, v] : env.vars) initial[k] = v;
  EXPECT_EQ(interpreted(envProgramScript(p), initial)->at("CUDA_VERSION"), "11.0");
}

// The launch memo keeps one plan for every rank (rewiredEnvironment): what computeEnvironment
// gives for one rank's environment, rewired with another's, is what it gives for the other's,
// whenever wiringPassesThrough; and it says false wherever a rewired plan would be wrong.
TEST(Environment, RewiringOneRanksEnvironmentGivesAnothersWhereTheWiringPassesThrough) {
  const std::vector<std::string> rank3{"HOME=/home/u", "FOO=bar", "OMPI_COMM_WORLD_RANK=3", "PMIX_RANK=3",
                                       "PMIX_NAMESPACE=job.1", "SLURM_PROCID=3", "PMI_FD=5", "TERM=xterm"};
  const std::vector<std::string> rank7{"HOME=/home/u", "FOO=bar", "OMPI_COMM_WORLD_RANK=7", "PMIX_RANK=7",
                                       "PMIX_NAMESPACE=job.2", "SLURM_LOCALID=1", "BAD-NAME=x", "TERM=xterm",
                                       "PMIX_RANK=8"};
  for (const bool cleanEnv : {false, true})
    for (const bool imageFirst : {false, true}) {
      EnvironmentInputs in;
      in.cleanEnv = cleanEnv;
      in.imageFirst = imageFirst;
      in.image = {{"IMAGE_VAR", "1"}};
      in.imagePath = "/images/app.sif";
      in.libraryDirs = {"/.singularity.d/libs"};
      in.host = rank3;
      const Environment three = computeEnvironment(in);
      in.host = rank7;
      const Environment seven = computeEnvironment(in);
      EXPECT_TRUE(three.wiringPassesThrough);
      EXPECT_EQ(rewiredEnvironment(toEnvp(three), rank7), toEnvp(seven)) << cleanEnv << imageFirst;
      EXPECT_EQ(rewiredEnvironment(toEnvp(seven), rank3), toEnvp(three)) << cleanEnv << imageFirst;
      EXPECT_EQ(three.hostFallback, seven.hostFallback);  // the wiring is never a fallback
    }
}

// Outside MPI and Slurm nothing is swapped: the same strings as the map's path gives, for a
// launch (no wiring on either side), and where one side has wiring or the strings are not
// toEnvp's (out of order, a name twice, no '='), the map's path itself.
TEST(Environment, RewiringWithoutWiringGivesTheSameStrings) {
  EnvironmentInputs in;
  in.host = {"HOME=/home/u", "FOO=bar", "TERM=xterm", "PATH=/usr/bin"};
  in.image = {{"IMAGE_VAR", "1"}};
  const auto plain = toEnvp(computeEnvironment(in));
  EXPECT_EQ(rewiredEnvironment(plain, {"HOME=/elsewhere", "OTHER=1"}), plain);  // only wiring is taken
  EXPECT_EQ(rewiredEnvironment(plain, {"PMIX_RANK=2"}).size(), plain.size() + 1);
  EXPECT_EQ(rewiredEnvironment({"B=1", "A=2"}, {}), (std::vector<std::string>{"A=2", "B=1"}));
  EXPECT_EQ(rewiredEnvironment({"A=1", "A=2"}, {}), (std::vector<std::string>{"A=2"}));
  EXPECT_EQ(rewiredEnvironment({"A=1", "NOEQUALS", "B=2"}, {}), (std::vector<std::string>{"A=1", "B=2"}));
  EXPECT_EQ(rewiredEnvironment({"A=1", "PMIX_RANK=1"}, {}), (std::vector<std::string>{"A=1"}));
}

TEST(Environment, WiringDoesNotPassThroughWhereTheImageOrNoEnvChangesIt) {
  EnvironmentInputs in;
  in.host = {"PMIX_RANK=3", "OMPI_MCA_btl=self"};
  EXPECT_TRUE(computeEnvironment(in).wiringPassesThrough);
  in.image = {{"OMPI_MCA_btl", "^openib"}};  // the image's value wins over the rank's
  EXPECT_FALSE(computeEnvironment(in).wiringPassesThrough);
  in.image.clear();
  in.noEnv = {"PMIX_RANK"};
  EXPECT_FALSE(computeEnvironment(in).wiringPassesThrough);
  in.noEnv.clear();
  in.devices = {{"SLURM_STEP_GPUS", "0"}};
  EXPECT_FALSE(computeEnvironment(in).wiringPassesThrough);
}
