// What the user sees while ctr-bench runs: on a terminal one status line rewritten in place
// (workload, block k/n, verdicts so far, ETA); otherwise plain lines, one per event, so a CI
// log stays readable (drawn with ctr::StatusLine). And the table printed at the end.
#pragma once

#include <ostream>
#include <string>

#include "ctr/status_line.hpp"
#include "result.hpp"

namespace ctr::bench {

class Progress {
 public:
  Progress();
  void status(const std::string& text);  // transient (TTY) or a plain line
  void line(const std::string& text);    // a line that stays
  void done();                           // clears the status line
  // " | PASS 3, INCONCLUSIVE 1" from a workload's FOM list.
  static std::string verdictSummary(const std::vector<FomResult>& foms);

 private:
  StatusLine line_;
  std::string last_;
};

// FOM, overhead, CI, verdict per workload; skipped and failed workloads with their reason.
void printSummaryTable(const Result& result, std::ostream& out);

}  // namespace ctr::bench
