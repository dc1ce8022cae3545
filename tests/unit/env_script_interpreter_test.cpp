// The env-script interpreter must give exactly the environment a real shell gives after
// sourcing the same script: checked here against dash and busybox sh on Apptainer's stock
// templates (as they appear in images of several versions) and on crafted scripts, and it
// must decline what it does not interpret exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "ctr/env_script_interpreter.hpp"
#include "ctr/run_process.hpp"
#include "platform_probes.hpp"

namespace {

using ctr::launch::interpretEnvScript;
using ctr::launch::ShellVars;
using Env = std::map<std::string, std::string>;

const Env kStart = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                    {"HOME", "/home/alice"},
                    {"LD_LIBRARY_PATH", ""},
                    {"SING_USER_DEFINED_PREPEND_PATH", "/opt/pre"},
                    {"KEEP", "kept value"}};

// The shell's own variables, not the scripts' effect: SHLVL (busybox and bash count shell
// levels, dash does not), PWD (set by every shell at start; ctr sets it the same way), _.
bool shellOwn(const std::string& name) { return name == "SHLVL" || name == "PWD" || name == "_"; }

Env runShell(const std::vector<std::string>& shell, const std::string& script) {
  auto file = std::filesystem::temp_directory_path() / ("ctr-envscript-" + std::to_string(::getpid()) + ".sh");
  std::ofstream(file) << script;
  std::vector<std::string> argv = {"/usr/bin/env", "-i"};
  for (const auto& [k, v] : kStart) argv.push_back(k + "=" + v);
  argv.insert(argv.end(), shell.begin(), shell.end());
  argv.insert(argv.end(), {"-c", ". \"$1\" && exec /usr/bin/env -0", "sh", file.string()});
  ctr::ProcessOptions options;
  options.captureStdout = true;
  auto result = ctr::runProcess(argv, options);
  std::filesystem::remove(file);
  Env env;
  const std::string& out = result.capturedStdout;
  for (size_t pos = 0; pos < out.size();) {
    size_t end = out.find('\0', pos);
    std::string kv = out.substr(pos, end - pos);
    pos = end + 1;
    auto eq = kv.find('=');
    if (!shellOwn(kv.substr(0, eq))) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

Env runInterpreter(const std::string& script, std::string* why) {
  ShellVars vars;
  for (const auto& [k, v] : kStart) vars.vars[k] = {v, true, true};
  *why = interpretEnvScript(script, vars);
  Env env;
  for (const auto& [k, v] : vars.vars)
    if (v.set && v.exported && !shellOwn(k)) env[k] = v.value;
  return env;
}

std::vector<std::vector<std::string>> shells() {
  std::vector<std::vector<std::string>> found;
  if (::access("/bin/dash", X_OK) == 0) found.push_back({"/bin/dash"});
  if (::access("/bin/busybox", X_OK) == 0) found.push_back({"/bin/busybox", "sh"});
  return found;
}

void expectSameAsShells(const std::string& script) {
  std::string why;
  Env ours = runInterpreter(script, &why);
  ASSERT_EQ(why, "") << "declined:\n" << script;
  for (const auto& shell : shells()) EXPECT_EQ(ours, runShell(shell, script)) << shell[0] << " on:\n" << script;
}

// Stock templates (the shape Apptainer and SingularityCE write; headers vary by version).
const char* k99Base =
    "#!/bin/sh\n# Custom environment shell code should follow\n\n"
    "if [ -z \"$LD_LIBRARY_PATH\" ]; then\n    LD_LIBRARY_PATH=\"/.singularity.d/libs\"\nelse\n"
    "    LD_LIBRARY_PATH=\"$LD_LIBRARY_PATH:/.singularity.d/libs\"\nfi\n\n"
    "PS1=\"Apptainer> \"\nexport LD_LIBRARY_PATH PS1\n";
const char* k99RuntimeVars =
    "#!/bin/sh\n\nif [ -n \"${SING_USER_DEFINED_PREPEND_PATH:-}\" ]; then\n"
    "\tPATH=\"${SING_USER_DEFINED_PREPEND_PATH}:${PATH}\"\nfi\n\n"
    "if [ -n \"${SING_USER_DEFINED_APPEND_PATH:-}\" ]; then\n\tPATH=\"${PATH}:${SING_USER_DEFINED_APPEND_PATH}\"\nfi\n\n"
    "if [ -n \"${SING_USER_DEFINED_PATH:-}\" ]; then\n\tPATH=\"${SING_USER_DEFINED_PATH}\"\nfi\n\n"
    "unset SING_USER_DEFINED_PREPEND_PATH \\\n\t  SING_USER_DEFINED_APPEND_PATH \\\n\t  SING_USER_DEFINED_PATH\n\n"
    "export PATH\n";
const char* kRuntimeVarsTest =
    "if test -n \"${SING_USER_DEFINED_PREPEND_PATH:-}\"; then\n"
    "    PATH=\"${SING_USER_DEFINED_PREPEND_PATH}:${PATH}\"\n    unset SING_USER_DEFINED_PREPEND_PATH\nfi\n"
    "export PATH\n";
const char* k01Base = "#!/bin/sh\n# \n# Copyright (c) Contributors to the Apptainer project.\n#\n\n";
const char* k95Apps =
    "#!/bin/sh\n\nif test -n \"${SCIF_APPNAME:-}\"; then\n\n    # The active app should be exported\n"
    "    export SCIF_APPNAME\n\n    if test -d \"/scif/apps/${SCIF_APPNAME:-}\"; then\n"
    "        SCIF_APPROOT=\"/scif/apps/${SCIF_APPNAME:-}\"\n        export SCIF_APPROOT\n    fi\nfi\n";
const char* kDocker =
    "#!/bin/sh\nexport PATH=\"/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"\n"
    "export LANG=\"C.UTF-8\"\nexport CONDA_DIR='/opt/conda'\n";

}  // namespace


TEST(EnvScript, StockTemplatesGiveTheShellsEnvironment) {
  if (shells().empty()) CTR_SKIP_BECAUSE("neither dash nor busybox is installed to compare with");
  for (const char* script : {k01Base, k95Apps, k99Base, k99RuntimeVars, kRuntimeVarsTest, kDocker})
    expectSameAsShells(script);
}

TEST(EnvScript, CraftedScriptsGiveTheShellsEnvironment) {
  if (shells().empty()) CTR_SKIP_BECAUSE("neither dash nor busybox is installed to compare with");
  for (const char* script : {
           "A=1\nB=$A\nexport B\n",                       // B exported, A stays a shell variable
           "export A=1 B=\"two words\"; C='single $A'\n",  // C not exported
           "X=\"a\\\"b\\\\c\\$d\"; export X\n",              // escapes in double quotes
           "export E=${UNSET_VAR:-fallback} F=${KEEP:+alt} G=${KEEP-dflt}\n",
           "export H=${UNSET_VAR=assigned}; export UNSET_VAR\n",
           "unset KEEP\nexport KEEP\n",                     // exported but unset: absent
           "if [ \"$KEEP\" = \"kept value\" ]; then export M=eq; elif [ -n x ]; then export M=no; fi\n",
           "if [ \"$KEEP\" != \"kept value\" ]; then export N=1; else export N=2; fi\n",
           "if ! [ -z \"$HOME\" ]; then export O=home; fi\n",
           "export P=a\\\nb\n",                              // continuation inside a word
           ": nothing\ntrue\nexport Q=\"$PATH\":/extra\n",
           "if [ -n \"$NOPE\" ]; then\n  if [ -z x ]; then export R=1; fi\nelse\n  export R=2\nfi\n",
           "if [ -z x ]; then export R2=1; elif [ -n x ]; then export R2=2; else export R2=3; fi\n",
           "if [ -n x ]; then export R3=1; elif [ \"${R4:=side}\" = x ]; then :; fi\nexport R4\n",
           "export ${KEEP:+S}=1\n" /* declined below if not exact */}) {
    std::string why;
    (void)runInterpreter(script, &why);
    if (!why.empty()) continue;  // declined: the shell does it (checked by the next test)
    expectSameAsShells(script);
  }
}

TEST(EnvScript, QuotesInsideADoubleQuotedOperandGiveTheShellsEnvironment) {
  // The env script ctr writes for a Docker image: export X="${X:-"value"}". The inner
  // quotes are removed, as the shells do; a ' there is itself.
  if (shells().empty()) CTR_SKIP_BECAUSE("neither dash nor busybox is installed to compare with");
  for (const char* script : {
           "export DQ=\"${UNSET_VAR:-\"hello from the image\"}\" DK=\"${KEEP:-\"x\"}\"\n",
           "export SQ=\"${UNSET_VAR:-'q'}\" UQ=${UNSET_VAR:-\"p  q\"} BR=\"${UNSET_VAR:-a\\}b}\"\n",
           "export NQ=\"${UNSET_VAR:-\"in \\\"q\\\"\"}\"\n"}) {
    expectSameAsShells(script);
  }
}

TEST(EnvScript, AndOrListsInConditionsGiveTheShellsEnvironment) {
  // Images built by ctr (95-apps.sh) and many others test two things in one `if`.
  if (shells().empty()) CTR_SKIP_BECAUSE("neither dash nor busybox is installed to compare with");
  for (const char* script : {
           "if [ -n \"$KEEP\" ] && [ -z \"${NOPE:-}\" ]; then export T=1; fi\n",
           "if [ -z \"$KEEP\" ] && [ \"${U:=side}\" = x ]; then :; fi\nexport U\n",  // not evaluated: no side effect
           "if [ -z \"$KEEP\" ] || [ -n \"$HOME\" ]; then export V=1; else export V=2; fi\n",
           "if [ -n x ] || [ \"${W:=side}\" = x ]; then export W; fi\n",
           "if [ -z x ] && [ -n y ] || [ -n z ]; then export X=1; fi\n",  // left to right
           "if [ -n x ] || [ -z y ] && [ -z z ]; then export Y=1; else export Y=2; fi\n",
           "if ! [ -n x ] || ! [ -z \"$KEEP\" ]; then export Z=1; fi\n",
           "if [ -n x ] &&\n   [ -n y ]; then export AA=1; fi\n",
           "if [ -z x ]; then :; elif [ -n x ] && [ -n \"$KEEP\" ]; then export BB=1; fi\n",
           "if [ -z x ]; then\n  if [ -n x ] && [ \"${CC:=side}\" = x ]; then :; fi\nfi\nexport CC\n"}) {
    expectSameAsShells(script);
  }
}

TEST(EnvScript, DeclinesWhatItDoesNotInterpretExactly) {
  for (const char* script : {
           "export A=$(id -u)\n", "export A=`id -u`\n", "export A=$((1+2))\n", ". /etc/profile\n",
           "source /x\n", "for i in a b; do export X=$i; done\n", "A=1 env\n", "export A=~/bin\n",
           "export A=$1\n", "case x in x) export A=1;; esac\n", "f() { :; }\n", "set -e\n",
           "export A=1 && export B=2\n", "[ -n x ] || export A=1\n", "echo hi > /tmp/x\n",
           "if [ -d /opt ]; then export A=1; fi\n", "if [ -n $EMPTY_OR_SPLIT ]; then :; fi\n",
           "if [ -n \"$x\" ]; then\n  A=$(id)\nfi\n", "export A=\"unterminated\n"}) {
    ShellVars vars;
    EXPECT_NE(interpretEnvScript(script, vars), "") << "should decline:\n" << script;
  }
}
