// The Apptainer definition-file parser (issue 9): each section, apps, stages, templating,
// the stored text, the script helpers, and every refusal with its "FILE:LINE:" message.
#include "ctr/deffile.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ctr/error.hpp"

namespace {

namespace deffile = ctr::builder::deffile;
using deffile::DefinitionFile;
using deffile::FileEntry;
using deffile::Label;
using Args = std::map<std::string, std::string>;

DefinitionFile parse(const std::string& text, const Args& buildArgs = {}) {
  return deffile::parseDefinition(text, "recipe.def", buildArgs);
}

// The message of the ctr::Error parsing `text` throws, or "" when it parses.
std::string errorOf(const std::string& text, const Args& buildArgs = {}) {
  try {
    (void)parse(text, buildArgs);
  } catch (const ctr::Error& e) {
    return e.what();
  }
  return "";
}

TEST(DefFile, ReadsHeaderKeywordsInOrderWithTypedAccessors) {
  auto file = parse(
      "Bootstrap: debootstrap\n"
      "OSVersion: bookworm\n"
      "MirrorURL: http://deb.debian.org/debian\n"
      "Include: ca-certificates\n"
      "Stage: build\n"
      "Registry: example.org\n");
  ASSERT_EQ(file.stages.size(), 1u);
  const auto& h = file.stages[0].header;
  EXPECT_EQ(h.bootstrap(), "debootstrap");
  EXPECT_EQ(h.osVersion(), "bookworm");
  EXPECT_EQ(h.mirrorUrl(), "http://deb.debian.org/debian");
  EXPECT_EQ(h.include(), "ca-certificates");
  EXPECT_EQ(h.stage(), "build");
  EXPECT_EQ(h.from(), "");
  ASSERT_EQ(h.fields.size(), 6u);
  EXPECT_EQ(h.fields[5], (deffile::HeaderField{"registry", "example.org", 6}));
  EXPECT_EQ(file.stages[0].line, 1);
  EXPECT_TRUE(file.warnings.empty());
}

TEST(DefFile, HeaderSkipsCommentsAndBlankLinesAndCutsInlineComments) {
  auto file = parse(
      "Bootstrap: docker   # where from\n"
      "\n"
      "# a comment line\n"
      "  From:   alpine:3.19#pinned\n");
  const auto& h = file.stages[0].header;
  EXPECT_EQ(h.bootstrap(), "docker");
  EXPECT_EQ(h.from(), "alpine:3.19");
  EXPECT_EQ(h.find("from")->line, 4);
}

TEST(DefFile, HeaderKeywordsIgnoreCaseAndALaterValueReplacesAnEarlierOne) {
  auto file = parse("BOOTSTRAP: docker\nfrom: alpine\nFROM: debian\n");
  const auto& h = file.stages[0].header;
  ASSERT_EQ(h.fields.size(), 2u);
  EXPECT_EQ(h.fields[1], (deffile::HeaderField{"from", "debian", 3}));
}

TEST(DefFile, HeaderValueEndingInBackslashContinuesOnTheNextLine) {
  auto file = parse(
      "Bootstrap: yum\n"
      "Include: dnf \\\n"
      "   vim-minimal\n"
      "Setopt: a=1\\n\\\n"
      "b=2\n"
      "OSVersion: 9 \\\n");
  const auto& h = file.stages[0].header;
  EXPECT_EQ(h.include(), "dnf vim-minimal");
  EXPECT_EQ(h.find("include")->line, 2);
  EXPECT_EQ(h.value("setopt"), "a=1\nb=2");
  // Apptainer loses a continuation that ends the header; ctr keeps it.
  EXPECT_EQ(h.osVersion(), "9 ");
}

TEST(DefFile, NumberedOtherUrlAndFingerprintsAreAcceptedFingerprintsWithAWarning) {
  auto file =
      parse("Bootstrap: localimage\nFrom: base.sif\nOtherURL0: http://x\nFingerprints: ABCD\n");
  EXPECT_EQ(file.stages[0].header.value("otherurl0"), "http://x");
  ASSERT_EQ(file.warnings.size(), 1u);
  EXPECT_EQ(file.warnings[0],
            "recipe.def:4: ctr does not verify signatures: the 'Fingerprints' header is ignored");
}

TEST(DefFile, HeaderOnlyFileIsOneStageWithoutSections) {
  auto file = parse("Bootstrap: docker\nFrom: alpine");
  ASSERT_EQ(file.stages.size(), 1u);
  const auto& d = file.stages[0];
  EXPECT_EQ(d.header.from(), "alpine");
  EXPECT_FALSE(d.post.present());
  EXPECT_TRUE(d.files.empty());
  EXPECT_TRUE(d.apps.empty());
  EXPECT_EQ(file.storedText, "Bootstrap: docker\nFrom: alpine");
}

TEST(DefFile, KeepsEveryScriptSectionBodyVerbatimWithItsLine) {
  auto file = parse(
      "Bootstrap: docker\n"  // 1
      "From: alpine\n"       // 2
      "%pre\n"               // 3
      "  echo pre\n"         // 4
      "%setup\n"             // 5
      "  touch ${APPTAINER_ROOTFS}/x # keep\n"
      "\n"
      "%post\n"  // 8
      "  apk add gcc\n"
      "# not a section\n"
      "%environment\n"  // 11
      "  export A=1\n"
      "%runscript\n"  // 13
      "  exec app \"$@\"\n"
      "%startscript\n"  // 15
      "  exec daemon\n"
      "%test\n"  // 17
      "  app --version\n"
      "%help\n"  // 19
      "Usage: run it\n");
  const auto& d = file.stages[0];
  EXPECT_EQ(d.pre.body, "  echo pre\n");
  EXPECT_EQ(d.pre.line, 3);
  EXPECT_EQ(d.setup.body, "  touch ${APPTAINER_ROOTFS}/x # keep\n\n");
  EXPECT_EQ(d.setup.line, 5);
  EXPECT_EQ(d.post.body, "  apk add gcc\n# not a section\n");
  EXPECT_EQ(d.post.line, 8);
  EXPECT_EQ(d.environment.body, "  export A=1\n");
  EXPECT_EQ(d.environment.line, 11);
  EXPECT_EQ(d.runscript.body, "  exec app \"$@\"\n");
  EXPECT_EQ(d.runscript.line, 13);
  EXPECT_EQ(d.startscript.body, "  exec daemon\n");
  EXPECT_EQ(d.startscript.line, 15);
  EXPECT_EQ(d.test.body, "  app --version\n");
  EXPECT_EQ(d.test.line, 17);
  EXPECT_EQ(d.help.body, "Usage: run it\n");
  EXPECT_EQ(d.help.line, 19);
  EXPECT_EQ(d.post.name, "post");
}

TEST(DefFile, SectionNamesIgnoreCaseAndMayBeIndented) {
  auto file = parse("Bootstrap: docker\nFrom: alpine\n   %POST -c /bin/bash\necho hi\n");
  EXPECT_EQ(file.stages[0].post.args, "-c /bin/bash");
  EXPECT_EQ(file.stages[0].post.body, "echo hi\n");
}

TEST(DefFile, KeepsSectionArgumentsSuchAsTheInterpreter) {
  auto file = parse(
      "Bootstrap: docker\nFrom: alpine\n"
      "%post -c /bin/bash -l\nset -o pipefail\n"
      "%runscript\t-x\nexec app\n");
  EXPECT_EQ(file.stages[0].post.args, "-c /bin/bash -l");
  EXPECT_EQ(file.stages[0].runscript.args, "-x");
}

TEST(DefFile, SecondSectionOfAKindIsAppendedWithAWarning) {
  auto file = parse(
      "Bootstrap: docker\nFrom: alpine\n"
      "%post\necho one\n"
      "%post -c /bin/bash\necho two\n");
  const auto& post = file.stages[0].post;
  EXPECT_EQ(post.body, "echo one\necho two\n");
  EXPECT_EQ(post.args, "-c /bin/bash");
  EXPECT_EQ(post.line, 3);
  ASSERT_EQ(file.warnings.size(), 1u);
  EXPECT_EQ(file.warnings[0],
            "recipe.def:5: second %post section: its body is appended to the one at line 3");
}

TEST(DefFile, LabelsAreOrderedKeyAndRestOfLine) {
  auto file = parse(
      "Bootstrap: docker\nFrom: alpine\n"
      "%labels\n"
      "  Maintainer  Jane Doe <jane@example.org>\n"
      "  # comment\n"
      "\tVersion\tv1.0\n"
      "  Empty\n"
      "  Maintainer someone else\n");
  const auto& labels = file.stages[0].labels;
  ASSERT_EQ(labels.size(), 3u);
  EXPECT_EQ(labels[0], (Label{"Maintainer", "someone else", 8}));
  EXPECT_EQ(labels[1], (Label{"Version", "v1.0", 6}));
  EXPECT_EQ(labels[2], (Label{"Empty", "", 7}));
  EXPECT_TRUE(file.stages[0].labelsSection.present());
}

TEST(DefFile, ArgumentsGiveNamedDefaultsAndABadLineIsSkippedWithAWarning) {
  auto file = parse(
      "Bootstrap: docker\nFrom: alpine\n"
      "%arguments\n"
      "  # defaults\n"
      "  VERSION = 1.2.3\n"
      "  PREFIX=/opt\n"
      "  junk\n");
  EXPECT_EQ(file.stages[0].arguments, (Args{{"PREFIX", "/opt"}, {"VERSION", "1.2.3"}}));
  ASSERT_EQ(file.warnings.size(), 1u);
  EXPECT_EQ(file.warnings[0], "recipe.def:7: %arguments line 'junk' is not NAME=VALUE; skipped");
}

TEST(DefFile, FilesLinesGiveSourceAndOptionalDestinationWithQuotes) {
  auto file = parse(
      "Bootstrap: docker\nFrom: alpine\n"
      "%files\n"             // 3
      "  app.tar.gz /opt\n"  // 4
      "  # comment\n"
      "  README\n"                               // 6
      "  \"my file.txt\" '/opt/my dir/'\n"       // 7
      "  conf /etc/app.conf # inline comment\n"  // 8
      "%files\n"                                 // 9
      "  later /srv\n");                         // 10
  const auto& files = file.stages[0].files;
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].fromStage, "");
  EXPECT_EQ(files[0].line, 3);
  EXPECT_EQ(files[0].entries, (std::vector<FileEntry>{{"app.tar.gz", "/opt", 4},
                                                      {"README", "", 6},
                                                      {"my file.txt", "/opt/my dir/", 7},
                                                      {"conf", "/etc/app.conf", 8},
                                                      {"later", "/srv", 10}}));
}

TEST(DefFile, AppSectionsAreGroupedByAppInOrderOfFirstAppearance) {
  auto file = parse(
      "Bootstrap: docker\nFrom: alpine\n"
      "%appinstall foo\n"  // 3
      "  make foo\n"
      "%apprun bar\n"  // 5
      "  exec bar\n"
      "%appenv foo\n"
      "  FOO=1\n"
      "%applabels foo\n"
      "  Author me\n"
      "%appfiles foo\n"  // 11
      "  foo.conf etc/\n"
      "%apphelp foo\n"
      "  help\n"
      "%apptest foo\n"
      "  foo --test\n"
      "%appstart bar\n"
      "  bar-daemon\n");
  const auto& apps = file.stages[0].apps;
  ASSERT_EQ(apps.size(), 2u);
  EXPECT_EQ(apps[0].name, "foo");
  EXPECT_EQ(apps[0].line, 3);
  EXPECT_EQ(apps[0].install.body, "  make foo\n");
  EXPECT_EQ(apps[0].env.body, "  FOO=1\n");
  EXPECT_EQ(apps[0].labelEntries, (std::vector<Label>{{"Author", "me", 10}}));
  EXPECT_EQ(apps[0].fileEntries, (std::vector<FileEntry>{{"foo.conf", "etc/", 12}}));
  EXPECT_EQ(apps[0].files.line, 11);
  EXPECT_EQ(apps[0].help.body, "  help\n");
  EXPECT_EQ(apps[0].test.body, "  foo --test\n");
  EXPECT_FALSE(apps[0].run.present());
  EXPECT_EQ(apps[1].name, "bar");
  EXPECT_EQ(apps[1].run.body, "  exec bar\n");
  EXPECT_EQ(apps[1].start.body, "  bar-daemon\n");
}

TEST(DefFile, StagesSplitAtBootstrapLinesAndFilesFromNamesAnEarlierStage) {
  const std::string text =
      "# builder first\n"
      "Bootstrap: docker\n"  // 2
      "From: gcc:13\n"
      "Stage: build\n"
      "%post\n"
      "  make\n"
      "\n"
      "bootstrap: docker\n"  // 8
      "From: debian:12-slim\n"
      "Stage: final\n"
      "%files from build\n"  // 11
      "  /src/app /usr/local/bin/app\n"
      "%files\n"
      "  local.conf /etc/\n"
      "%files from build  # the rest\n"
      "  /src/lib.so /usr/lib/\n";
  auto file = parse(text);
  ASSERT_EQ(file.stages.size(), 2u);
  EXPECT_EQ(file.stages[0].header.stage(), "build");
  EXPECT_EQ(file.stages[0].line, 2);
  EXPECT_EQ(file.stages[0].post.body, "  make\n\n");
  const auto& final = file.stages[1];
  EXPECT_EQ(final.line, 8);
  ASSERT_EQ(final.files.size(), 2u);
  EXPECT_EQ(final.files[0].fromStage, "build");
  EXPECT_EQ(final.files[0].line, 11);
  EXPECT_EQ(final.files[0].entries, (std::vector<FileEntry>{{"/src/app", "/usr/local/bin/app", 12},
                                                            {"/src/lib.so", "/usr/lib/", 16}}));
  EXPECT_EQ(final.files[1].fromStage, "");
  // What Apptainer stores: the stages' text, without what stands before the first one.
  EXPECT_EQ(file.storedText, text.substr(text.find("Bootstrap:")));
  EXPECT_EQ(file.storedText, file.stages[0].raw + file.stages[1].raw);
}

TEST(DefFile, ABootstrapLineInsideABodyStartsANewStageAsInApptainer) {
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\n%post\ncat <<EOF\nBootstrap: x\nEOF\n"),
            "recipe.def:6: header line 'EOF' has no ':' (expected 'Keyword: value')");
  auto file = parse("Bootstrap: docker\nFrom: a\n%post\ncat <<EOF\nBootstrap: x\n%post\nEOF\n");
  ASSERT_EQ(file.stages.size(), 2u);
  EXPECT_EQ(file.stages[0].post.body, "cat <<EOF\n");
  EXPECT_EQ(file.stages[1].header.bootstrap(), "x");
}

TEST(DefFile, TemplatingUsesArgumentDefaultsOverriddenByBuildArgs) {
  const std::string text =
      "Bootstrap: docker\n"
      "From: alpine:{{ TAG }}\n"
      "%arguments\n"
      "  TAG=3.19\n"
      "  PREFIX=/opt/{{TAG}}\n"
      "%post\n"
      "  echo {{PREFIX}} {{ TAG }}\n";
  auto defaults = parse(text);
  EXPECT_EQ(defaults.stages[0].header.from(), "alpine:3.19");
  EXPECT_EQ(defaults.stages[0].post.body, "  echo /opt/3.19 3.19\n");
  EXPECT_EQ(defaults.stages[0].arguments.at("PREFIX"), "/opt/{{TAG}}");
  EXPECT_NE(defaults.storedText.find("From: alpine:3.19\n"), std::string::npos);

  auto overridden = parse(text, {{"TAG", "edge"}});
  EXPECT_EQ(overridden.stages[0].header.from(), "alpine:edge");
  EXPECT_EQ(overridden.stages[0].post.body, "  echo /opt/edge edge\n");
  EXPECT_TRUE(overridden.unusedBuildArgs.empty());
}

TEST(DefFile, ArgumentDefaultMayUseABuildArgButNotAnUndefinedName) {
  const std::string text =
      "Bootstrap: docker\nFrom: alpine\n%arguments\n  DIR=/opt/{{ NAME }}\n%post\n  mkdir {{ DIR "
      "}}\n";
  auto file = parse(text, {{"NAME", "app"}});
  EXPECT_EQ(file.stages[0].post.body, "  mkdir /opt/app\n");
  EXPECT_TRUE(file.unusedBuildArgs.empty());
  EXPECT_EQ(errorOf(text),
            "recipe.def:4: build variable 'NAME' is not defined (give --build-arg "
            "NAME=VALUE or a default in %arguments)");
}

// A newline in a value would start a line of its own: "%setup" there runs on the host.
TEST(DefFile, RefusesBuildArgValuesThatCarryNewlinesOrControlCharacters) {
  const std::string text = "Bootstrap: scratch\n%post\n  echo {{ GREETING }}\n";
  EXPECT_EQ(errorOf(text, {{"GREETING", "hi\n%setup\n  touch /tmp/owned"}}),
            "--build-arg GREETING: the value holds a newline; a build argument is one line of text");
  EXPECT_EQ(errorOf(text, {{"GREETING", "hi\r%setup"}}),
            "--build-arg GREETING: the value holds a carriage return; a build argument is one line of text");
  EXPECT_EQ(errorOf(text, {{"GREETING", std::string("a\0b", 3)}}),
            "--build-arg GREETING: the value holds a control character 0x00; a build argument is one line of text");
  EXPECT_EQ(errorOf(text, {{"GREETING", "a\x1b[2Jb"}}),
            "--build-arg GREETING: the value holds a control character 0x1b; a build argument is one line of text");
  // Unused values are checked too: the check is of the input, not of where it lands.
  EXPECT_NE(errorOf(text, {{"GREETING", "hi"}, {"OTHER", "x\ny"}}), "");
  EXPECT_EQ(parse(text, {{"GREETING", "tab\tand spaces, quotes \" and unicode \xc3\xa9"}}).stages[0].post.body,
            "  echo tab\tand spaces, quotes \" and unicode \xc3\xa9\n");
}

TEST(DefFile, ReportsBuildArgsNoStageUsesSorted) {
  auto file = parse("Bootstrap: docker\nFrom: {{ IMG }}\n",
                    {{"IMG", "alpine"}, {"ZED", "1"}, {"ALPHA", "2"}});
  EXPECT_EQ(file.unusedBuildArgs, (std::vector<std::string>{"ALPHA", "ZED"}));
}

TEST(DefFile, PlaceholderOnACommentedLineStaysAsWritten) {
  auto file = parse(
      "Bootstrap: docker\nFrom: alpine\n"
      "%post\n"
      "  # uses {{ UNDEFINED }}\n"
      "  echo hi # {{ ALSO_UNDEFINED }}\n"
      "  #!{{ X }}\n"
      "  echo {{ X }} # {{ X }}\n"
      "  #{{ X }}\n",  // Apptainer's test wants a character between '#' and the {{
      {{"X", "sh"}});
  EXPECT_EQ(file.stages[0].post.body,
            "  # uses {{ UNDEFINED }}\n  echo hi # {{ ALSO_UNDEFINED }}\n  #!sh\n"
            "  echo sh # {{ X }}\n  #sh\n");
}

TEST(DefFile, RefusesATemplatedDefinitionThatGrowsPastSixteenMiB) {
  std::string text =
      "Bootstrap: docker\nFrom: a\n%arguments\n  A=" + std::string(1 << 20, 'x') + "\n%post\n";
  for (int i = 0; i < 20; ++i) text += "{{A}}";
  EXPECT_EQ(errorOf(text), "recipe.def:6: the definition grows past 16 MiB when templated");
}

TEST(DefFile, UndefinedVariableIsAnErrorNamingItAndItsLine) {
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: alpine\n%post\n  echo {{ VERSION }}\n"),
            "recipe.def:4: build variable 'VERSION' is not defined (give --build-arg "
            "VERSION=VALUE or a default in %arguments)");
}

TEST(DefFile, ArgumentDefaultsBelongToTheirStage) {
  const std::string text =
      "Bootstrap: docker\nFrom: alpine\nStage: one\n%arguments\n  V=1\n%post\n  echo {{ V }}\n"
      "Bootstrap: docker\nFrom: alpine\n%post\n  echo {{ V }}\n";
  EXPECT_EQ(errorOf(text),
            "recipe.def:11: build variable 'V' is not defined (give --build-arg "
            "V=VALUE or a default in %arguments)");
  auto file = parse(text, {{"V", "2"}});
  EXPECT_EQ(file.stages[0].post.body, "  echo 2\n");
  EXPECT_EQ(file.stages[1].post.body, "  echo 2\n");
}

// Line numbers after a templated line stay those of the file (a value is one line).
TEST(DefFile, TemplatedValueKeepsTheLineNumbersOfLaterLines) {
  auto file = parse("Bootstrap: docker\nFrom: alpine\n%post\n  {{ CMDS }}\n%runscript\n  run\n",
                    {{"CMDS", "a; b; c"}});
  EXPECT_EQ(file.stages[0].post.body, "  a; b; c\n");
  EXPECT_EQ(file.stages[0].runscript.line, 5);
}

TEST(DefFile, CrlfLineEndsAreRemovedFromPartsAndKeptInTheStoredText) {
  const std::string text =
      "Bootstrap: docker\r\nFrom: alpine\r\n%post\r\n  echo hi\r\n%labels\r\n  A b\r\n";
  auto file = parse(text);
  const auto& d = file.stages[0];
  EXPECT_EQ(d.header.from(), "alpine");
  EXPECT_EQ(d.post.body, "  echo hi\n");
  EXPECT_EQ(d.labels, (std::vector<Label>{{"A", "b", 6}}));
  EXPECT_EQ(file.storedText, text);
}

TEST(DefFile, EmptyOrCommentOnlyFileIsRefused) {
  EXPECT_EQ(errorOf(""), "recipe.def:1: missing 'Bootstrap:' header (the definition is empty)");
  EXPECT_EQ(errorOf("# nothing\n\n   \n"),
            "recipe.def:1: missing 'Bootstrap:' header (the definition is empty)");
}

TEST(DefFile, RefusesContentBeforeTheFirstBootstrap) {
  EXPECT_EQ(errorOf("# about\n%post\n  echo\n"),
            "recipe.def:2: missing 'Bootstrap:' header (each stage of a definition starts "
            "with a 'Bootstrap:' line)");
  EXPECT_EQ(errorOf("From: alpine\nBootstrap: docker\n"),
            "recipe.def:1: missing 'Bootstrap:' header (each stage of a definition starts "
            "with a 'Bootstrap:' line)");
}

TEST(DefFile, RefusesUnknownSection) {
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: alpine\n\n%pots\n  echo\n"),
            "recipe.def:4: unknown section %pots (expected one of %arguments, %pre, %setup, "
            "%files, %post, %environment, %runscript, %startscript, %test, %labels, %help, or "
            "an app section %appinstall, %appfiles, %appenv, %apprun, %applabels, %apphelp, "
            "%apptest, %appstart)");
}

TEST(DefFile, RefusesHeaderLineWithoutColon) {
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom alpine # base\n"),
            "recipe.def:2: header line 'From alpine' has no ':' (expected 'Keyword: value')");
}

TEST(DefFile, RefusesUnknownHeaderKeyword) {
  std::string message = errorOf("Bootstrap: docker\nFrmo: alpine\n");
  EXPECT_TRUE(
      message.starts_with("recipe.def:2: unknown header keyword 'Frmo' (expected one of "
                          "Bootstrap, From, "))
      << message;
  EXPECT_NE(errorOf("Bootstrap: docker\nOtherURL: x\n"), "");
  EXPECT_NE(errorOf("Bootstrap: docker\nOtherURLx1: x\n"), "");
}

TEST(DefFile, RefusesBootstrapWithoutValue) {
  EXPECT_EQ(errorOf("Bootstrap:   # none\nFrom: alpine\n"),
            "recipe.def:1: 'Bootstrap:' has no value (expected e.g. 'Bootstrap: docker')");
}

TEST(DefFile, RefusesAppSectionWithoutOrWithABadAppName) {
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\n%apprun\n  x\n"),
            "recipe.def:3: %apprun needs an app name (expected '%apprun NAME')");
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\n%appinstall ../etc\n  x\n"),
            "recipe.def:3: app name '../etc' must be one path component (it becomes "
            "/scif/apps/../etc)");
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\n%appenv ..\n"),
            "recipe.def:3: app name '..' must be one path component (it becomes /scif/apps/..)");
}

TEST(DefFile, AppSectionWordsAfterTheNameAreIgnoredWithAWarning) {
  auto file = parse("Bootstrap: docker\nFrom: a\n%apprun foo extra\n  x\n");
  EXPECT_EQ(file.stages[0].apps.at(0).name, "foo");
  EXPECT_EQ(file.warnings,
            (std::vector<std::string>{
                "recipe.def:3: %apprun foo: the words after the app name are ignored"}));
}

TEST(DefFile, RefusesFilesArgumentsOtherThanFromStage) {
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\n%files to x\n"),
            "recipe.def:3: %files takes nothing or 'from STAGE', not 'to x'");
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\n%files from\n"),
            "recipe.def:3: %files takes nothing or 'from STAGE', not 'from'");
}

TEST(DefFile, RefusesFilesFromAStageThatIsNotAnEarlierOne) {
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\nStage: one\n%files from two\n  /x\n"
                    "Bootstrap: docker\nFrom: a\nStage: two\n"),
            "recipe.def:4: %files from two: no earlier stage has 'Stage: two'");
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\nStage: one\n%files from one\n  /x\n"),
            "recipe.def:4: %files from one: no earlier stage has 'Stage: one'");
}

TEST(DefFile, RefusesTwoStagesWithOneName) {
  EXPECT_EQ(
      errorOf("Bootstrap: docker\nFrom: a\nStage: s\n\nBootstrap: docker\nFrom: b\nStage: s\n"),
      "recipe.def:7: stage name 's' is already used by the stage at line 1");
}

TEST(DefFile, RefusesMalformedFilesLines) {
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\n%files\n  \"my file /opt\n"),
            "recipe.def:4: unterminated \" in %files line '\"my file /opt'");
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\n%files\n  my file /opt\n"),
            "recipe.def:4: %files line 'my file /opt' has more than a source and a "
            "destination (quote a path that holds blanks)");
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\n%appfiles x\n  '' /opt\n"),
            "recipe.def:4: %appfiles line ''' /opt' has no source");
}

TEST(DefFile, RefusesDashCWithoutInterpreter) {
  EXPECT_EQ(errorOf("Bootstrap: docker\nFrom: a\n%post -c # bash\n  x\n"),
            "recipe.def:3: %post -c needs an interpreter (expected e.g. '%post -c /bin/bash')");
}

TEST(DefFile, ScriptCommandRunsShellWithErrexitAndXtraceOrTheDashCInterpreter) {
  deffile::Section post = deffile::namedSection("post");
  EXPECT_EQ(deffile::scriptCommand(post, "/.post.script"),
            (std::vector<std::string>{"/bin/sh", "-ex", "/.post.script"}));
  post.args = "-c /bin/bash -l   # login shell";
  EXPECT_EQ(deffile::scriptCommand(post, "/.post.script"),
            (std::vector<std::string>{"/bin/sh", "-ex", "-c", "/bin/bash -l /.post.script"}));
  post.args = "-u";
  EXPECT_EQ(deffile::scriptCommand(post, "/s"),
            (std::vector<std::string>{"/bin/sh", "-ex", "-u", "/s"}));
  post.args = "-c";
  try {
    (void)deffile::scriptCommand(post, "/s");
    FAIL() << "no error for -c without interpreter";
  } catch (const ctr::Error& e) {
    EXPECT_STREQ(e.what(), "%post -c needs an interpreter (expected e.g. '%post -c /bin/bash')");
  }
}

TEST(DefFile, ShebangScriptUsesBinShOrTheBodysOwnInterpreterLine) {
  auto file = parse(
      "Bootstrap: docker\nFrom: a\n"
      "%runscript\n  exec app \"$@\"\n"
      "%startscript\n\n  #!/bin/bash\n  exec daemon\n"
      "%test -x # trace\n  #!/usr/bin/env python3\nprint(1)\n");
  const auto& d = file.stages[0];
  EXPECT_EQ(deffile::shebangScript(d.runscript), "#!/bin/sh\n\n  exec app \"$@\"\n\n");
  EXPECT_EQ(deffile::shebangScript(d.startscript), "#!/bin/bash\n\n  exec daemon\n\n");
  EXPECT_EQ(deffile::shebangScript(d.test), "#!/usr/bin/env python3 -x\n\nprint(1)\n\n");
}

TEST(DefFile, FormatsADefinitionMadeInCodeAsApptainerDoesForABuildFromAUri) {
  deffile::Definition d;
  d.header.fields = {{"bootstrap", "docker", 0}, {"from", "alpine:3.19", 0}};
  EXPECT_EQ(deffile::formatDefinition(d), "bootstrap: docker\nfrom: alpine:3.19\n\n");
}

TEST(DefFile, FormattedDefinitionParsesBackToTheSameData) {
  const std::string text =
      "Bootstrap: docker\nFrom: gcc\nStage: build\nSetopt: a=1\\n\\\nb=2\n"
      "%post -c /bin/bash\n  make\n"
      "Bootstrap: docker\nFrom: debian\n"
      "%arguments\n  V=1\n"
      "%files from build\n  /a \"/b c\"\n"
      "%files\n  'x\"y' z\n  only\n"
      "%environment\n  export A=1\n"
      "%runscript\n  exec app\n"
      "%labels\n  K v w\n  Empty\n"
      "%help\n  help text\n"
      "%appinstall foo\n  make foo\n"
      "%appfiles foo\n  f.conf etc/\n"
      "%applabels foo\n  L 1\n";
  auto first = parse(text);
  std::string formatted;
  for (const auto& stage : first.stages) formatted += deffile::formatDefinition(stage);
  auto second = parse(formatted);
  ASSERT_EQ(second.stages.size(), first.stages.size()) << formatted;
  for (size_t i = 0; i < first.stages.size(); ++i) {
    const auto& a = first.stages[i];
    const auto& b = second.stages[i];
    for (size_t f = 0; f < a.header.fields.size(); ++f) {
      EXPECT_EQ(a.header.fields[f].keyword, b.header.fields.at(f).keyword);
      EXPECT_EQ(a.header.fields[f].value, b.header.fields.at(f).value);
    }
    EXPECT_EQ(a.arguments, b.arguments);
    EXPECT_EQ(a.post.body, b.post.body);
    EXPECT_EQ(a.post.args, b.post.args);
    EXPECT_EQ(a.environment.body, b.environment.body);
    EXPECT_EQ(a.runscript.body, b.runscript.body);
    EXPECT_EQ(a.help.body, b.help.body);
    ASSERT_EQ(a.files.size(), b.files.size()) << formatted;
    for (size_t f = 0; f < a.files.size(); ++f) {
      EXPECT_EQ(a.files[f].fromStage, b.files[f].fromStage);
      ASSERT_EQ(a.files[f].entries.size(), b.files[f].entries.size());
      for (size_t e = 0; e < a.files[f].entries.size(); ++e) {
        EXPECT_EQ(a.files[f].entries[e].source, b.files[f].entries[e].source);
        EXPECT_EQ(a.files[f].entries[e].destination, b.files[f].entries[e].destination);
      }
    }
    ASSERT_EQ(a.labels.size(), b.labels.size());
    for (size_t l = 0; l < a.labels.size(); ++l) {
      EXPECT_EQ(a.labels[l].key, b.labels[l].key);
      EXPECT_EQ(a.labels[l].value, b.labels[l].value);
    }
    ASSERT_EQ(a.apps.size(), b.apps.size());
    for (size_t p = 0; p < a.apps.size(); ++p) {
      EXPECT_EQ(a.apps[p].name, b.apps[p].name);
      EXPECT_EQ(a.apps[p].install.body, b.apps[p].install.body);
      EXPECT_EQ(a.apps[p].fileEntries.size(), b.apps[p].fileEntries.size());
      EXPECT_EQ(a.apps[p].labelEntries.size(), b.apps[p].labelEntries.size());
    }
  }
}

// The fuzzer's seeds are accepted definitions, so mutations start from valid ones.
TEST(DefFile, FuzzSeedCorpusFilesAllParse) {
  const std::filesystem::path dir =
      std::filesystem::path(CTR_SOURCE_DIR) / "tests/fuzz/corpus/deffile";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW((void)parse(text.str(), {{"VERSION", "1.2"}, {"MULTI", "a b"}}));
    ++files;
  }
  EXPECT_GE(files, 5);
}

}  // namespace
