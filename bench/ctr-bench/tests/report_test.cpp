// ctr-bench report on a hand-written result (tests/report_fixture.json): six workloads (two
// passing GEMMs, a noisy STREAM, a failing OSU latency with a failed launch, a site workload
// with a hostile name whose FOM is an ERROR, a skipped GPU workload, a crashed ResNet), cold
// start and two scenarios.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <variant>

#include "ctr/error.hpp"
#include "report.hpp"
#include "report_model.hpp"
#include "result.hpp"

// report.cmake names the fixture; ctr-bench's own test binary (tests/CMakeLists.txt takes
// every tests/*.cpp) knows only the source tree.
#ifndef CTR_BENCH_REPORT_FIXTURE
#define CTR_BENCH_REPORT_FIXTURE CTR_BENCH_SOURCE_DIR "/bench/ctr-bench/tests/report_fixture.json"
#endif

namespace ctr::bench {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json fixture() {
  std::ifstream in(CTR_BENCH_REPORT_FIXTURE);
  EXPECT_TRUE(in) << "cannot read " << CTR_BENCH_REPORT_FIXTURE;
  return json::parse(in);
}

std::string readText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The Markdown table row of one FOM: the line that has both names.
std::string rowOf(const std::string& markdown, const std::string& workload, const std::string& fom) {
  std::istringstream lines(markdown);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("| " + workload + " | " + fom + " |", 0) == 0) return line;
  return "";
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The plot list the page renders: the JSON inside <script id="ctr-bench-plots">.
json plotsOf(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"ctr-bench-plots\">";
  size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  begin += open.size();
  size_t end = html.find("</script>", begin);
  return json::parse(html.substr(begin, end - begin));
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::is_regular_file(vegaDirectory() / "vega-view.min.js"))
        << "Vega is needed for the HTML report: install Debian's libjs-vega (tests/install-deps.sh)";
  }
};

TEST_F(ReportTest, MarkdownHasEveryFomRowWithItsVerdict) {
  std::string md = renderMarkdown(fixture());
  EXPECT_NE(rowOf(md, "gemm-cpu", "dgemm\\_n2048").find("**PASS**"), std::string::npos) << md;
  EXPECT_NE(rowOf(md, "gemm-cpu", "sgemm\\_n2048").find("**PASS**"), std::string::npos);
  EXPECT_NE(rowOf(md, "stream", "triad").find("**PASS**"), std::string::npos);
  std::string copy = rowOf(md, "stream", "copy");
  EXPECT_NE(copy.find("**INCONCLUSIVE**"), std::string::npos);
  EXPECT_NE(copy.find("too noisy to resolve delta 3.0% (baseline CV 2.6%)"), std::string::npos);
  std::string latency = rowOf(md, "osu-latency", "latency\\_8B");
  EXPECT_NE(latency.find("**FAIL**"), std::string::npos);
  EXPECT_NE(latency.find("+11.14%"), std::string::npos) << latency;
  EXPECT_NE(latency.find("[+9.44%, +12.84%]"), std::string::npos);
  EXPECT_NE(latency.find("±5.0%"), std::string::npos);
  std::string site = rowOf(md, "\\<script\\>alert('site')\\</script\\> site-app", "steps\\_per\\_s \\<script\\>");
  EXPECT_NE(site.find("**ERROR**"), std::string::npos) << md;
  // A '|' in a note must not split the table row.
  EXPECT_NE(site.find("in any block \\| see errors"), std::string::npos) << site;
  // A workload that failed before reporting any FOM still has a row, as an ERROR.
  EXPECT_NE(rowOf(md, "resnet-ddp", "—").find("**ERROR**"), std::string::npos);
  EXPECT_EQ(rowOf(md, "gemm-gpu", "—"), "") << "a skipped workload is listed with its reason, not as a result";
}

TEST_F(ReportTest, MarkdownHeaderSaysWhichQuestionWasAsked) {
  json result = fixture();
  std::string md = renderMarkdown(result);
  EXPECT_NE(md.find("# ctr-bench report: Runtime overhead"), std::string::npos);
  EXPECT_NE(md.find("cost of the container runtime itself"), std::string::npos);
  EXPECT_NE(md.find("- Profile: quick\n- Duration: 12 min 10 s"), std::string::npos) << md;
  EXPECT_NE(md.find("- Interrupted: no\n"), std::string::npos);
  EXPECT_NE(md.find("AMD EPYC 9654 96-Core Processor"), std::string::npos);
  EXPECT_NE(md.find("- Exit status: 3\n"), std::string::npos);
  EXPECT_NE(md.find("- Verdicts: 3 PASS, 1 FAIL, 0 FASTER, 1 INCONCLUSIVE, 2 ERROR, 1 skipped\n"), std::string::npos);

  result["mode"] = "image-vs-host";
  md = renderMarkdown(result);
  EXPECT_NE(md.find("# ctr-bench report: Image stack delta"), std::string::npos);
  EXPECT_NE(md.find("not a runtime overhead of ctr"), std::string::npos);
  EXPECT_EQ(md.find("Runtime overhead"), std::string::npos) << "a stack delta must not read as a runtime overhead";

  result["mode"] = "image-vs-image";
  for (auto& w : result["workloads"]) w["labels"] = {{"A", "generic.sif"}, {"B", "znver4.sif"}};
  md = renderMarkdown(result);
  EXPECT_NE(md.find("# ctr-bench report: Image vs image"), std::string::npos);
  EXPECT_NE(md.find("A = generic.sif, B = znver4.sif"), std::string::npos);
}

TEST_F(ReportTest, MarkdownFlagsAnInterruptedRun) {
  json result = fixture();
  result["interrupted"] = true;
  std::string md = renderMarkdown(result);
  EXPECT_NE(md.find("**Interrupted:**"), std::string::npos);
  EXPECT_NE(md.find("- Interrupted: **yes**"), std::string::npos);
}

TEST_F(ReportTest, MarkdownListsSkippedWorkloadsAndErrorsWithStderr) {
  std::string md = renderMarkdown(fixture());
  EXPECT_NE(md.find("## Skipped workloads\n\n- **gemm-gpu**: no GPU: nvidia-smi not found and no /dev/nvidia0"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("### osu-latency / latency\\_8B (block 3, side B)\n\nexit status 1"), std::string::npos);
  EXPECT_NE(md.find("shmem: mmap: Cannot allocate memory"), std::string::npos);
  EXPECT_NE(md.find("ModuleNotFoundError: No module named 'torch'"), std::string::npos);
  // The stderr holds a ``` run: its block is fenced with four backticks so it cannot end early.
  EXPECT_NE(md.find("````text\napp: cannot open in.dat\n"), std::string::npos);
}

TEST_F(ReportTest, MarkdownShowsColdStartAndScenarios) {
  std::string md = renderMarkdown(fixture());
  EXPECT_NE(md.find("| cold | 90.30 ms | 5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| warm | 12.30 ms | 5 |"), std::string::npos);
  EXPECT_NE(md.find("### cpu-steps"), std::string::npos);
  EXPECT_NE(md.find("| --cpus 0.5 | 21.20 | 5 |"), std::string::npos);
  EXPECT_NE(md.find("| 2 copies | 7310 | 5 | 14620 |"), std::string::npos);
}

// Markdown without its fenced code blocks, which render literally.
std::string outsideCodeBlocks(const std::string& markdown) {
  std::istringstream lines(markdown);
  std::string out, fence;
  for (std::string line; std::getline(lines, line);) {
    size_t ticks = line.find_first_not_of('`');
    if (ticks >= 3 && fence.empty()) {
      fence = line.substr(0, ticks);
    } else if (!fence.empty() && line == fence) {
      fence.clear();
    } else if (fence.empty()) {
      out += line + "\n";
    }
  }
  return out;
}

TEST_F(ReportTest, MarkdownRendersNoHtmlFromTheResult) {
  std::string whole = renderMarkdown(fixture());
  ASSERT_NE(whole.find("</script><script>document.body.dataset.pwned"), std::string::npos)
      << "stderr is quoted verbatim in a code block";
  std::string md = outsideCodeBlocks(whole);
  // Markdown renders "\<" as a literal '<': no '<' from the result may stand unescaped.
  for (size_t at = md.find('<'); at != std::string::npos; at = md.find('<', at + 1))
    EXPECT_TRUE(at > 0 && md[at - 1] == '\\') << "unescaped '<' in: " << md.substr(at, 40);
  EXPECT_NE(md.find("\\<script\\>alert"), std::string::npos);
}

TEST_F(ReportTest, HtmlLetsNoMarkupFromTheResultThrough) {
  std::string html = renderHtml(fixture());
  // Exactly the page's own three scripts: plot specs, Vega, the renderer.
  EXPECT_EQ(count(html, "<script"), 3u);
  EXPECT_EQ(count(html, "</script>"), 3u);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>lab"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;site&#39;)&lt;/script&gt; site-app"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;/script&gt;&lt;script&gt;document.body.dataset.pwned"), std::string::npos);
  // In the plot specs the same name is JSON with '<' escaped, and still says the same thing.
  json plots = plotsOf(html);
  EXPECT_NE(plots.dump().find("<script>alert('site')</script> site-app"), std::string::npos);
}

TEST_F(ReportTest, HtmlInlinesVegaAndLoadsNothing) {
  std::string html = renderHtml(fixture());
  std::string view = readText(vegaDirectory() / "vega-view.min.js");
  std::string head = view.substr(0, 2000);
  EXPECT_NE(html.find(head), std::string::npos) << "vega-view.min.js is not inlined";
  EXPECT_NE(html.find("function ctrBenchVega()"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("//# sourceMappingURL"), std::string::npos);
}

TEST_F(ReportTest, HtmlHasOnePlotPerFomPlusOverviewColdStartAndScenarios) {
  std::string html = renderHtml(fixture());
  json plots = plotsOf(html);
  std::vector<std::string> ids;
  for (const auto& p : plots) ids.push_back(p["id"]);
  std::vector<std::string> expected = {"plot-overview", "plot-fom-0-0", "plot-fom-0-1", "plot-fom-1-0",
                                       "plot-fom-1-1",  "plot-fom-2-0", "plot-fom-3-0", "plot-cold-start",
                                       "plot-scenario-0", "plot-scenario-1"};
  EXPECT_EQ(ids, expected);
  for (const auto& id : ids) {
    EXPECT_EQ(count(html, "id=\"" + id + "\""), 1u) << id;
  }
  for (const auto& p : plots) {
    EXPECT_TRUE(p["spec"].contains("marks")) << p["id"];
    EXPECT_TRUE(p["spec"].contains("scales")) << p["id"];
  }
}

TEST_F(ReportTest, DistributionPlotsCarryEveryValidSampleOfBothSides) {
  json plots = plotsOf(renderHtml(fixture()));
  auto samplesOf = [&](const std::string& id) {
    for (const auto& p : plots)
      if (p["id"] == id) return p["spec"]["data"][0]["values"];
    return json::array();
  };
  json dgemm = samplesOf("plot-fom-0-0");
  ASSERT_EQ(dgemm.size(), 20u);
  EXPECT_EQ(dgemm[0]["side"], "bare (A)");
  EXPECT_EQ(dgemm[10]["side"], "ctr (B)");
  EXPECT_EQ(dgemm[0]["value"], fixture()["workloads"][0]["foms"][0]["samples"]["A"][0]);
  // The failed launch (block 3, B) is left out, not drawn as zero.
  json latency = samplesOf("plot-fom-2-0");
  EXPECT_EQ(latency.size(), 19u);
  for (const auto& s : latency) EXPECT_FALSE(s["side"] == "ctr (B)" && s["block"] == 3);
  EXPECT_EQ(samplesOf("plot-fom-3-0").size(), 0u);
}

TEST_F(ReportTest, OverviewHasARowPerFomWithCiAndDeltaInPercent) {
  json plots = plotsOf(renderHtml(fixture()));
  json rows = plots[0]["spec"]["data"][0]["values"];
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[4]["row"], "osu-latency · latency_8B");
  EXPECT_NEAR(rows[4]["o"].get<double>(), 11.14, 1e-9);
  EXPECT_NEAR(rows[4]["lo"].get<double>(), 9.44, 1e-9);
  EXPECT_NEAR(rows[4]["hi"].get<double>(), 12.84, 1e-9);
  EXPECT_DOUBLE_EQ(rows[4]["dn"].get<double>(), -5.0);
  EXPECT_DOUBLE_EQ(rows[4]["dp"].get<double>(), 5.0);
  EXPECT_EQ(rows[4]["verdict"], "FAIL");
  EXPECT_TRUE(rows[5]["o"].is_null());
  EXPECT_EQ(rows[5]["verdict"], "ERROR");
}

TEST_F(ReportTest, MissingOptionalPartsStillMakeAReport) {
  json minimal = json::parse(R"({
    "format": "ctr-bench-result", "version": 1, "mode": "runtime-overhead",
    "cold_start": null, "host": null,
    "workloads": [{"name": "only", "status": "ok", "foms": [{"name": "t", "samples": null, "analysis": null}]}]
  })");
  std::string md = renderMarkdown(minimal);
  EXPECT_NE(rowOf(md, "only", "t").find("— (not analysed)"), std::string::npos) << md;
  EXPECT_NE(md.find("Not measured in this run."), std::string::npos);
  EXPECT_EQ(md.find("## Scenarios"), std::string::npos);
  std::string html = renderHtml(minimal);
  json plots = plotsOf(html);
  ASSERT_EQ(plots.size(), 2u);
  EXPECT_EQ(plots[0]["id"], "plot-overview");
  EXPECT_EQ(plots[1]["id"], "plot-fom-0-0");

  json empty = {{"mode", "runtime-overhead"}, {"workloads", json::array()}};
  EXPECT_NE(renderMarkdown(empty).find("(no workload ran)"), std::string::npos);
  EXPECT_EQ(plotsOf(renderHtml(empty)).size(), 0u);
}

// Shapes that `ctr-bench run` writes besides the schema's example: a warm-up failure has a
// block name, cold start has its own errors, the host carries ctr check's list of checks.
TEST_F(ReportTest, ReadsWhatCtrBenchRunWrites) {
  json result = json::parse(R"J({
    "format": "ctr-bench-result", "version": 1, "mode": "runtime-overhead",
    "host": {"hostname": "vm", "cpu_model": "AMD EPYC", "cores": 2, "numa_nodes": 1, "memory_bytes": 25232932864,
             "gpu": null, "ctr_version": "ctr version 0.1.0",
             "hwloc_topology": "Machine (23GB total)\n  Package L#0",
             "ctr_check": {"checks": [{"name": "/dev/fuse", "status": "ok", "detail": "present"}]}},
    "cold_start": {"rounds": 5, "samples_s": {"bare": [0.0007], "warm": [0.0035], "cold": []},
                   "median_s": {"bare": 0.0007, "warm": 0.0035, "cold": null},
                   "errors": [{"case": "cold", "message": "exit status 255", "stderr_tail": "squashfuse_ll: not found"}]},
    "workloads": [{"name": "broken", "status": "error", "reason": "the ctr launch failed at warm-up (exit status 3)",
      "stderr_tail": "cannot open /data/input", "labels": {"A": "bare", "B": "ctr"},
      "foms": [{"name": "rate", "unit": "x/s", "direction": "higher", "delta": 0.05,
        "samples": {"A": [], "B": []},
        "errors": [{"block": "warm-up", "side": "B", "message": "exit status 3", "stderr_tail": "cannot open /data/input"}],
        "analysis": {"n_pairs": 0, "cv_a": 0, "cv_b": 0, "min": {"A": null, "B": null}, "median": {"A": null, "B": null},
                     "overhead": null, "ci": null, "ci_method": "bootstrap-median", "verdict": "ERROR",
                     "note": "no complete pair of samples"}}]}],
    "scenarios": [
      {"name": "cpu-steps", "kind": "limit-steps", "workload": "osu", "skipped": "an MPI workload: limits apply per rank"},
      {"name": "concurrent", "kind": "concurrent-copies", "workload": "broken", "fom": "rate", "rounds": 2, "points": [
        {"limit": "1 concurrent", "copies": 1, "ctr_args": [], "samples": [10.0, 10.2], "median": 10.1, "aggregate": 10.1,
         "foms": {"rate": {"samples": [10.0, 10.2], "median": 10.1}}, "wall_s": [1.0, 1.1], "errors": []},
        {"limit": "2 concurrent", "copies": 2, "ctr_args": [], "samples": [6.0], "median": 6.0, "aggregate": 12.0,
         "errors": [{"message": "exit status 137", "stderr_tail": "Killed"}]}]}]
  })J");
  std::string md = renderMarkdown(result);
  EXPECT_NE(md.find("- Host: vm, AMD EPYC, 2 cores, 1 NUMA node, 23.5 GiB, no GPU, ctr version 0.1.0\n"), std::string::npos) << md;
  EXPECT_NE(md.find("### broken / rate (warm-up, side B)\n\nexit status 3"), std::string::npos);
  EXPECT_NE(md.find("### cold start (launch cold)\n\nexit status 255"), std::string::npos);
  EXPECT_NE(md.find("```text\nsquashfuse_ll: not found\n```"), std::string::npos) << "stderr is in a code block, verbatim";
  EXPECT_NE(md.find("| cold | — | 0 |"), std::string::npos);
  EXPECT_NE(md.find("- ctr\\_check.checks\\[/dev/fuse\\].status: ok"), std::string::npos);
  EXPECT_NE(md.find("- hwloc\\_topology:\n\n```text\nMachine (23GB total)\n  Package L#0\n```"), std::string::npos);
  EXPECT_NE(rowOf(md, "broken", "rate").find("**ERROR**"), std::string::npos);
  EXPECT_NE(md.find("### cpu-steps\n\nlimit-steps; osu\n\nSkipped: an MPI workload: limits apply per rank\n"), std::string::npos) << md;
  EXPECT_NE(md.find("concurrent-copies; broken / rate; x/s"), std::string::npos) << "the unit is the workload's FOM's";
  EXPECT_NE(md.find("| 2 concurrent | 6.000 | 1 | 12.00 |"), std::string::npos);
  EXPECT_NE(md.find("### scenario concurrent, 2 concurrent\n\nexit status 137"), std::string::npos);
  std::string html = renderHtml(result);
  EXPECT_NE(html.find("<h3>cold start (launch cold)</h3>"), std::string::npos);
  EXPECT_NE(html.find("<h3>cpu-steps</h3>\n<p class=\"desc\">limit-steps; osu</p>\n<p>Skipped: an MPI workload"), std::string::npos);
  json plots = plotsOf(html);
  ASSERT_EQ(plots.size(), 4u) << "overview, the FOM, cold start, the scenario that ran";
  EXPECT_EQ(plots[3]["id"], "plot-scenario-1");
  json lines = plots[3]["spec"]["data"][0]["values"];
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[3], json({{"step", "2 concurrent"}, {"value", 12.0}, {"series", "node aggregate"}}));
}

TEST_F(ReportTest, AWrongFieldIsNamed) {
  auto message = [](const json& result) {
    try {
      (void)renderMarkdown(result);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json result = fixture();
  result["workloads"][0]["foms"][1].erase("name");
  EXPECT_EQ(message(result), "result file: field workloads[0].foms[1].name: missing");

  result = fixture();
  result["workloads"][2]["foms"][0]["samples"]["B"][1] = "fast";
  EXPECT_EQ(message(result), "result file: field workloads[2].foms[0].samples.B[1]: expected a number or null, got string");

  result = fixture();
  result["mode"] = "containers-are-faster";
  EXPECT_NE(message(result).find("field mode: 'containers-are-faster' is not"), std::string::npos);

  result = fixture();
  result["workloads"][1]["foms"][0]["analysis"]["verdict"] = "OK";
  EXPECT_NE(message(result).find("workloads[1].foms[0].analysis.verdict"), std::string::npos);

  result = fixture();
  result.erase("workloads");
  EXPECT_EQ(message(result), "result file: field workloads: missing");

  EXPECT_EQ(message(json::array()), "result file: top level: expected an object");
}

TEST_F(ReportTest, WriteReportWritesBothFiles) {
  fs::path dir = fs::temp_directory_path() / ("ctr-bench-report-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  writeReport(resultFromJson(fixture()), dir / "report.md", dir / "report.html");
  EXPECT_EQ(readText(dir / "report.md"), renderMarkdown(fixture()));
  EXPECT_EQ(readText(dir / "report.html"), renderHtml(fixture()));
  EXPECT_FALSE(fs::exists(dir / "report.md.tmp"));
  EXPECT_THROW(writeReport(resultFromJson(fixture()), dir / "missing" / "r.md", dir / "missing" / "r.html"), Error);
  fs::remove_all(dir);
}

TEST_F(ReportTest, MissingVegaIsNamed) {
  const char* saved = std::getenv("CTR_BENCH_VEGA_DIR");
  std::string savedValue = saved ? saved : "";
  setenv("CTR_BENCH_VEGA_DIR", "/nonexistent/vega", 1);
  try {
    (void)renderHtml(fixture());
    ADD_FAILURE() << "no error without Vega";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/vega/vega-util.min.js is missing (install Debian's libjs-vega"),
              std::string::npos)
        << e.what();
  }
  if (saved) setenv("CTR_BENCH_VEGA_DIR", savedValue.c_str(), 1);
  else unsetenv("CTR_BENCH_VEGA_DIR");
}

TEST_F(ReportTest, StackDeltaIsAnEstimateWithItsIntervalNotAVerdict) {
  json result = fixture();
  result["mode"] = "image-vs-host";
  auto& a = result["workloads"][0]["foms"][0]["analysis"];
  a["verdict"] = "ESTIMATE";
  a["note"] = nullptr;
  a["speedup"] = {{"factor", 12.1}, {"ci", {11.0, 13.4}}};
  std::string md = renderMarkdown(result);
  std::string row = rowOf(md, "gemm-cpu", "dgemm\\_n2048");
  EXPECT_NE(row.find("**ESTIMATE**"), std::string::npos) << row;
  EXPECT_NE(row.find("B 12.10x faster \\[11.00, 13.40\\]"), std::string::npos) << row;
  EXPECT_NE(md.find("no overhead verdict"), std::string::npos);
  a["speedup"] = {{"factor", 0.5}, {"ci", {0.4, 0.625}}};
  row = rowOf(renderMarkdown(result), "gemm-cpu", "dgemm\\_n2048");
  EXPECT_NE(row.find("B 2.00x slower \\[1.60, 2.50\\]"), std::string::npos) << row;
}

TEST_F(ReportTest, ADataSourceComparisonHasItsOwnSectionApartFromTheOverheads) {
  json result = fixture();
  EXPECT_EQ(renderMarkdown(result).find("Data sources"), std::string::npos) << "no section without a comparison";
  result["workloads"][1]["source_comparison"] = {
      {"against", "gemm-cpu"},
      {"rows",
       {{{"fom", "triad_GBps"}, {"side", "B"}, {"unit", "GB/s"}, {"direction", "higher"}, {"delta", 0.05}, {"n", 12},
         {"n_against", 12}, {"median", 8.0}, {"median_against", 10.0}, {"ratio", 0.8}, {"ci", {0.75, 0.85}},
         {"ci_level", 0.9}, {"spread", 0.01}, {"verdict", "SLOWER"}, {"note", nullptr}}}}};
  const std::string md = renderMarkdown(result);
  const size_t section = md.find("Data sources (not runtime overhead)");
  ASSERT_NE(section, std::string::npos) << md;
  EXPECT_LT(md.find("| Workload | FOM |"), section) << "after the overhead table, not in it";
  const std::string row = rowOf(md.substr(section), "stream", "gemm-cpu");
  EXPECT_NE(row.find("x0.800"), std::string::npos) << row;
  EXPECT_NE(row.find("[0.750, 0.850] (90%)"), std::string::npos) << row;
  EXPECT_NE(row.find("**SLOWER**"), std::string::npos) << row;
  EXPECT_NE(row.find("| 12 / 12 |"), std::string::npos) << row;
  // Not counted among the run's verdicts.
  const size_t counts = md.find("- Verdicts: ");
  ASSERT_NE(counts, std::string::npos);
  EXPECT_EQ(md.substr(counts, md.find('\n', counts) - counts).find("SLOWER"), std::string::npos);
  EXPECT_NE(renderHtml(result).find("<span class=\"v-SLOWER\">SLOWER</span>"), std::string::npos);
  result["workloads"][1]["source_comparison"] = {{"against", "gemm-cpu"}, {"note", "gemm-cpu is not in this run"}, {"rows", json::array()}};
  EXPECT_NE(renderMarkdown(result).find("gemm-cpu is not in this run"), std::string::npos);
}

TEST_F(ReportTest, FasterIsItsOwnVerdictNotPass) {
  json result = fixture();
  auto& a = result["workloads"][0]["foms"][0]["analysis"];
  a["verdict"] = "FASTER";
  a["overhead"] = -0.57;
  a["ci"] = {-0.627, -0.521};
  std::string md = renderMarkdown(result);
  EXPECT_NE(rowOf(md, "gemm-cpu", "dgemm\\_n2048").find("**FASTER**"), std::string::npos);
  EXPECT_NE(md.find("2 PASS, 1 FAIL, 1 FASTER"), std::string::npos) << md;
}

TEST_F(ReportTest, OverviewAxisIsClippedSoOneWildIntervalKeepsTheDeltaBandVisible) {
  json result = fixture();
  auto& a = result["workloads"][0]["foms"][0]["analysis"];
  a["overhead"] = 2.0;
  a["ci"] = {-0.9, 400.0};  // +40,000%
  json spec = plotsOf(renderHtml(result))[0]["spec"];
  json domain = spec["scales"][1]["domain"];
  double limit = domain[1].get<double>();
  EXPECT_DOUBLE_EQ(domain[0].get<double>(), -limit);
  EXPECT_LT(limit, 1000) << "the axis follows the wild interval";
  EXPECT_GE(limit, 15) << "the ±5% band must stay visible (3x the largest delta)";
  EXPECT_TRUE(spec["scales"][1]["clamp"].get<bool>());
  json rows = spec["data"][0]["values"];
  EXPECT_TRUE(rows[0]["clipped_hi"].get<bool>());
  EXPECT_FALSE(rows[4]["clipped_hi"].get<bool>());
  EXPECT_NE(spec["title"]["subtitle"][1].get<std::string>().find("axis clipped at"), std::string::npos);
}


// The report model: what both renderings show, decided once.

const report::Section* sectionOf(const report::Report& r, const std::string& id) {
  for (const auto& s : r.sections)
    if (s.id == id) return &s;
  return nullptr;
}

TEST_F(ReportTest, ModelHasOneSummaryRowAndVerdictPerFom) {
  const Result result = resultFromJson(fixture());
  const report::Report r = report::buildReport(result);
  const report::Section* summary = sectionOf(r, "summary");
  ASSERT_NE(summary, nullptr);
  const auto* table = std::get_if<report::Table>(&summary->blocks.at(1));
  ASSERT_NE(table, nullptr);
  size_t expected = 0;
  for (const auto& w : result.workloads)
    if (w.status != "skipped") expected += std::max<size_t>(1, w.foms.size());
  ASSERT_EQ(table->rows.size(), expected);
  size_t row = 0;
  for (const auto& w : result.workloads) {
    if (w.status == "skipped") continue;
    for (const auto& f : w.foms) {
      const auto& cells = table->rows[row++];
      ASSERT_EQ(cells.size(), table->columns.size()) << w.name << " / " << f.name;
      EXPECT_EQ(cells[1].text, f.name);
      EXPECT_EQ(cells[10].kind, report::CellKind::Verdict);
      EXPECT_EQ(cells[10].text, report::rowVerdict(w, f));
    }
    if (w.foms.empty()) ++row;
  }
  std::vector<std::string> badges;
  for (const auto& b : r.counts) badges.push_back(std::to_string(b.count) + " " + b.label);
  EXPECT_EQ(badges, (std::vector<std::string>{"3 PASS", "1 FAIL", "0 FASTER", "1 INCONCLUSIVE", "2 ERROR", "1 skipped"}));
}

// Every figure is a plot on the page, once; one with a table shows that table in Markdown.
void collectFigures(const report::Section& s, std::vector<const report::Figure*>& out) {
  for (const auto& b : s.blocks)
    if (const auto* f = std::get_if<report::Figure>(&b)) out.push_back(f);
  for (const auto& sub : s.sections) collectFigures(sub, out);
}

TEST_F(ReportTest, BothRenderingsShowTheModelsSectionsAndFigures) {
  const Result result = resultFromJson(fixture());
  const report::Report r = report::buildReport(result);
  const std::string md = renderMarkdown(result);
  const std::string html = renderHtml(result);
  std::vector<const report::Figure*> figures;
  for (const auto& s : r.sections) {
    EXPECT_NE(html.find("<h2>" + s.title + "</h2>"), std::string::npos) << s.title;
    collectFigures(s, figures);
  }
  EXPECT_NE(md.find("## Results\n"), std::string::npos);
  EXPECT_NE(md.find("## Host fingerprint\n"), std::string::npos);
  EXPECT_EQ(md.find("## Distributions"), std::string::npos) << "a section of plots alone is left out of Markdown";
  json plots = plotsOf(html);
  ASSERT_EQ(plots.size(), figures.size());
  for (size_t i = 0; i < figures.size(); ++i) {
    EXPECT_EQ(plots[i]["id"], figures[i]->id);
    if (!figures[i]->asTable) continue;
    for (const auto& row : figures[i]->asTable->rows) {
      EXPECT_NE(md.find("| " + row[0].text + " | " + row[1].text + " |"), std::string::npos) << figures[i]->id;
    }
  }
}

}  // namespace
}  // namespace ctr::bench
