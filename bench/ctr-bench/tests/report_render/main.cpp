// ctr-bench-report-render RESULT.json MARKDOWN HTML: writeReport on a result file, for
// tests/integration/test_ctr_bench_report.sh (ctr-bench report does the same with options).
#include <fstream>
#include <iostream>

#include "ctr/error.hpp"
#include "report.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: ctr-bench-report-render RESULT.json MARKDOWN HTML\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    if (!in) throw ctr::Error(std::string("cannot read ") + argv[1]);
    nlohmann::json result = nlohmann::json::parse(in);
    ctr::bench::writeReport(ctr::bench::resultFromJson(result), argv[2], argv[3]);
  } catch (const std::exception& e) {
    std::cerr << "ctr-bench-report-render: " << argv[1] << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
