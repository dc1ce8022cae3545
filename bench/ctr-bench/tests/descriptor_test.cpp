#include "descriptor.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "ctr/error.hpp"
#include "fom.hpp"
#include "result.hpp"

using namespace ctr::bench;
namespace fs = std::filesystem;

namespace {

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = "/tmp/ctr-bench-test.XXXXXX";
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = t;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }
  std::string errorOf(const std::string& text) {
    try {
      loadDescriptor(write("bad.yaml", text));
    } catch (const ctr::Error& e) {
      return e.oneLine();
    }
    return "";
  }
  fs::path dir_;
};

using Descriptors = TempDir;
using Results = TempDir;

const char* kSite = R"(name: my-solver
description: the site's CFD solver
command: [sh, -c, 'echo "step time: 0.25 s"; echo "rate: 123.5 Mcells/s"']
output: regex
env: {OMP_NUM_THREADS: "2"}
foms:
  - {name: step_time, regex: 'step time: ([0-9.]+) s', unit: s, direction: lower, delta: 0.03}
  - {name: rate, regex: 'rate: ([0-9.]+)', unit: Mcells/s, direction: higher, delta: 0.05}
)";

}  // namespace

TEST_F(Descriptors, ReadsASiteWorkloadWithRegexes) {
  auto d = loadDescriptor(write("site.yaml", kSite));
  EXPECT_EQ(d.name, "my-solver");
  EXPECT_TRUE(d.regexOutput);
  ASSERT_EQ(d.command.size(), 3u);
  EXPECT_EQ(d.env.at("OMP_NUM_THREADS"), "2");
  ASSERT_EQ(d.foms.size(), 2u);
  EXPECT_EQ(d.foms[0].direction, Direction::Lower);
  EXPECT_DOUBLE_EQ(*d.foms[1].delta, 0.05);
}

TEST_F(Descriptors, ReadsQuickArgsMpiAndPlaceholders) {
  auto d = loadDescriptor(write("g.yaml",
                                "name: osu\ncommand: ['{bindir}/ctr-wl-osu', all]\nquick_args: [--quick, latency]\n"
                                "launcher: mpirun\nranks: 2\nmpirun_args: [--mca, plm_rsh_agent, '{bindir}/hosts.sh agent']\n"
                                "blocks: {quick: 5, full: 20}\nprofiles: [quick]\ntimeout_s: 30\n"
                                "setup: ['{bindir}/hosts.sh', up]\nteardown: rm -rf '{workdir}/x'\n"));
  EXPECT_TRUE(d.mpirun);
  EXPECT_EQ(d.ranks, 2);
  // quick_args replace the arguments of command.
  EXPECT_EQ(d.argv(Profile::Quick, false), (std::vector<std::string>{"{bindir}/ctr-wl-osu", "--quick", "latency"}));
  EXPECT_EQ(d.argv(Profile::Full, false), (std::vector<std::string>{"{bindir}/ctr-wl-osu", "all"}));
  EXPECT_EQ(d.blocks.at(Profile::Full), 20);
  EXPECT_EQ(d.profiles, (std::vector<Profile>{Profile::Quick}));
  EXPECT_DOUBLE_EQ(d.timeoutS, 30);
  Placeholders p{"/opt/bench", "/tmp/w/osu", "/share"};
  EXPECT_EQ(expand(d.mpirunArgs, p)[2], "/opt/bench/hosts.sh agent");
  EXPECT_EQ(expand(d.setup, p), (std::vector<std::string>{"/opt/bench/hosts.sh", "up"}));
  EXPECT_EQ(expand(d.teardown, p), (std::vector<std::string>{"/bin/sh", "-c", "rm -rf '/tmp/w/osu/x'"}));
}

TEST_F(Descriptors, QuickSetupReplacesSetupWithQuick) {
  auto d = loadDescriptor(write("s.yaml",
                                "name: files\ncommand: [reader, '{workdir}/d']\n"
                                "setup: [prep, '{workdir}/d', --count, '20000']\nquick_setup: prep --count 2000\n"));
  EXPECT_EQ(d.setupFor(Profile::Full), (std::vector<std::string>{"prep", "{workdir}/d", "--count", "20000"}));
  // A string is shell text, as for setup.
  EXPECT_EQ(d.setupFor(Profile::Quick), (std::vector<std::string>{"/bin/sh", "-c", "prep --count 2000"}));
  auto plain = loadDescriptor(write("p.yaml", "name: p\ncommand: [x]\nsetup: [prep]\n"));
  EXPECT_EQ(plain.setupFor(Profile::Quick), (std::vector<std::string>{"prep"}));
  EXPECT_NE(errorOf("name: x\ncommand: [x]\nquick_setup: []\n").find("bad.yaml: quick_setup: is empty"), std::string::npos);
}

TEST_F(Descriptors, ContainerArgsAndCompareSourceAreReadAndChecked) {
  auto d = loadDescriptor(write("img.yaml",
                                "name: reader-image\ncommand: [reader, '{workdir}/mnt']\n"
                                "container_args: [--bind, '{workdir}/d.sqfs:{workdir}/mnt:image-src=/']\n"
                                "compare_source: reader-dir\n"));
  EXPECT_EQ(d.containerArgs, (std::vector<std::string>{"--bind", "{workdir}/d.sqfs:{workdir}/mnt:image-src=/"}));
  EXPECT_EQ(expand(d.containerArgs, Placeholders{"/b", "/w", "/d"}),
            (std::vector<std::string>{"--bind", "/w/d.sqfs:/w/mnt:image-src=/"}));
  EXPECT_EQ(d.compareSource, "reader-dir");
  auto plain = loadDescriptor(write("p.yaml", "name: p\ncommand: [x]\n"));
  EXPECT_TRUE(plain.containerArgs.empty());
  EXPECT_TRUE(plain.compareSource.empty());
  EXPECT_NE(errorOf("name: x\ncommand: [x]\ncontainer_args: []\n").find("bad.yaml: container_args: is empty"), std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: [x]\ncontainer_args: [image.sif, --bind, /a]\n")
                .find("bad.yaml: container_args: 'image.sif' is not an option of ctr exec"),
            std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: [x]\ncontainer_args: [--stage, --, true]\n").find("container_args: '--' would end"),
            std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: [x]\ncompare_source: x\n").find("bad.yaml: compare_source: names the workload itself"),
            std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: [x]\ncompare_source: 'a b'\n").find("compare_source: 'a b' is not a workload name"),
            std::string::npos);
}

TEST_F(Descriptors, ReadsEverySuiteDescriptor) {
  // The suite's own files (bench/workloads) and its site example must load.
  fs::path suite = fs::path(CTR_BENCH_SOURCE_DIR) / "bench/workloads";
  if (!fs::is_directory(suite)) GTEST_SKIP() << "no " << suite;
  auto all = loadDescriptorDir(suite);
  EXPECT_GE(all.size(), 5u);
  for (const auto& d : all) EXPECT_FALSE(d.command.empty()) << d.file;
  auto site = loadDescriptor(suite / "examples/site-example.yaml");
  EXPECT_TRUE(site.regexOutput);
}

TEST_F(Descriptors, RefusesBadInputNamingFileAndKey) {
  EXPECT_NE(errorOf("command: [x]\n").find("bad.yaml: name: missing"), std::string::npos);
  EXPECT_NE(errorOf("name: x\n").find("bad.yaml: command: missing"), std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: y\ncomand: z\n").find("bad.yaml: comand: unknown key"), std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: y\nranks: 2\n").find("ranks: needs 'launcher: mpirun'"), std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: y\noutput: regex\nfoms: [{name: f, regex: 'no group', direction: lower, delta: 0.1}]\n")
                .find("foms[0].regex: needs a capture group"),
            std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: y\noutput: regex\nfoms: [{name: f, regex: '(x)', direction: up, delta: 0.1}]\n")
                .find("foms[0].direction: must be 'higher'"),
            std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: y\nfoms: [{name: f, delta: 2}]\n").find("foms[0].delta: must be a fraction"),
            std::string::npos);
  EXPECT_NE(errorOf("name: [x\n").find("bad.yaml:"), std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: y\ntimeout_s: soon\n").find("timeout_s: 'soon' is not a number"), std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: y\nlauncher: srun\n").find("launcher: must be 'direct' or 'mpirun'"), std::string::npos);
}

TEST_F(Descriptors, RegexOutputTakesTheLastMatchAndOverrides) {
  auto d = loadDescriptor(write("site.yaml", kSite));
  auto p = parseOutput(d, "step time: 0.30 s\nstep time: 0.25 s\nrate: 123.5 Mcells/s\n", "", {{"rate", 0.1}});
  ASSERT_FALSE(p.error);
  ASSERT_EQ(p.foms.size(), 2u);
  EXPECT_DOUBLE_EQ(*p.foms[0].value, 0.25);
  EXPECT_DOUBLE_EQ(p.foms[0].delta, 0.03);
  EXPECT_DOUBLE_EQ(*p.foms[1].value, 123.5);
  EXPECT_DOUBLE_EQ(p.foms[1].delta, 0.1);  // --delta rate=0.1
  auto missing = parseOutput(d, "nothing here\n", "", {});
  EXPECT_FALSE(missing.foms[0].value);
}

TEST_F(Descriptors, JsonOutputReadsTheLastResultLine) {
  auto d = loadDescriptor(write("g.yaml", "name: gemm\ncommand: x\nfoms: [{name: dgemm_n512, delta: 0.04}]\n"));
  std::string out =
      "warming up\n{\"workload\":\"gemm\",\"foms\":[{\"name\":\"old\",\"value\":1}]}\n"
      "{\"workload\":\"gemm\",\"foms\":[{\"name\":\"dgemm_n512\",\"value\":85.5,\"unit\":\"GFLOP/s\",\"direction\":\"higher\",\"delta\":0.02},"
      "{\"name\":\"t\",\"value\":0.5,\"unit\":\"s\",\"direction\":\"lower\",\"delta\":0.05}],\"info\":{\"threads\":2}}\n";
  auto p = parseOutput(d, out, "", {{"gemm/t", 0.07}});
  ASSERT_FALSE(p.error);
  ASSERT_EQ(p.foms.size(), 2u);
  EXPECT_EQ(p.foms[0].name, "dgemm_n512");
  EXPECT_DOUBLE_EQ(p.foms[0].delta, 0.04);  // the descriptor's override
  EXPECT_EQ(p.foms[1].direction, Direction::Lower);
  EXPECT_DOUBLE_EQ(p.foms[1].delta, 0.07);  // --delta gemm/t=0.07
  EXPECT_EQ(p.info["threads"], 2);
  EXPECT_TRUE(parseOutput(d, "no json\n", "", {}).error);
  EXPECT_TRUE(parseOutput(d, "{\"workload\": broken\n", "", {}).error);
}

TEST_F(Results, RefusesCorruptAndForeignFiles) {
  auto expectError = [&](const std::string& text, const std::string& needle) {
    auto p = write("r.json", text);
    try {
      readResultFile(p);
      FAIL() << "accepted: " << text;
    } catch (const ctr::Error& e) {
      EXPECT_NE(e.oneLine().find(needle), std::string::npos) << e.oneLine();
      EXPECT_EQ(e.oneLine().find('\n'), std::string::npos);
    }
  };
  expectError("{\"format\": \"ctr-bench-result\", \"version\": 1, \"workl", "not valid JSON");
  expectError("{\"format\": \"other\", \"version\": 1, \"workloads\": []}", "not a ctr-bench result");
  expectError("{\"format\": \"ctr-bench-result\", \"version\": 99, \"workloads\": []}", "version 99 is not supported");
  expectError("{\"format\": \"ctr-bench-result\", \"version\": 1, \"mode\": \"runtime-overhead\", \"workloads\": "
              "[{\"name\": \"x\", \"foms\": [{\"name\": \"f\", \"samples\": {\"A\": [\"fast\"], \"B\": []}}]}]}",
              "field workloads[0].foms[0].samples.A[0]: expected a number or null, got string");
}

TEST_F(Results, WritesAtomicallyAndReadsBack) {
  Result r;
  r.mode = "runtime-overhead";
  r.workloads.push_back(WorkloadResult{});
  r.workloads[0].name = "w";
  auto p = dir_ / "out.json";
  writeResultAtomic(p, r);
  EXPECT_EQ(readResultFile(p), r);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1u);  // no temporary file left
}

TEST_F(Descriptors, RegexFomsAreAlsoReadFromTheWorkloadsOutputFiles) {
  // hpcc writes its figures to hpccoutf.txt, not to stdout (issue 23, deliverable 5).
  auto d = loadDescriptor(write("hpcc.yaml",
                                "name: hpcc\ncommand: [hpcc]\noutput: regex\n"
                                "output_files: [\"{workdir}/hpccoutf.txt\"]\n"
                                "foms:\n  - {name: hpl, regex: 'HPL_Tflops=([0-9.eE+-]+)', unit: TFLOP/s, direction: higher, delta: 0.03}\n"));
  EXPECT_EQ(d.outputFiles, std::vector<std::string>{"{workdir}/hpccoutf.txt"});
  EXPECT_TRUE(parseOutput(d, "Begin of MPIRandomAccess section.\n", "", {}).error);
  auto p = parseOutput(d, "", "", {}, {"HPL_Tflops=0.0612\nStarDGEMM_Gflops=31.0\n"});
  ASSERT_FALSE(p.error);
  EXPECT_DOUBLE_EQ(*p.foms[0].value, 0.0612);
  EXPECT_NE(errorOf("name: x\ncommand: y\noutput_files: [out.txt]\n").find("output_files: needs 'output: regex'"),
            std::string::npos);
  EXPECT_NE(errorOf("name: x\ncommand: y\noutput: regex\noutput_files: [out.txt]\nfoms: [{name: f, regex: '(1)', direction: higher, delta: 0.1}]\n")
                .find("output_files: 'out.txt' is not an absolute path"),
            std::string::npos);
}
