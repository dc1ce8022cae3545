#!/bin/bash
# ctr-bench report's HTML page in a real browser (headless Chromium): every plot renders to
# SVG with the data it was given, nothing from the result file runs as script, and the page
# is worth a screenshot. The Markdown and the specs are checked by ctr-bench-report-tests.
# CTR_BENCH_REPORT_KEEP=DIR keeps the pages, DOM dumps and screenshots there.
. "$(dirname "$0")/lib.sh"

command -v chromium >/dev/null || skip "chromium is not installed (Debian package chromium, see tests/install-deps.sh)"
RENDER=${CTR_BUILD_DIR:?}/bin/ctr-bench-report-render
[ -x "$RENDER" ] || fail "$RENDER is missing (build target ctr-bench-report-render)"
FIXTURE=$CTR_SOURCE_DIR/bench/ctr-bench/tests/report_fixture.json

. "$CTR_SOURCE_DIR/bench/ctr-bench/tests/chromium-page.sh"

# The number of Vega symbols (dots) drawn inside each plot container, as "id count" lines.
symbols_per_plot() {
  perl -0ne 'while (/id="(plot-[^"]+)"(.*?)(?=id="plot-|<\/main>)/sg) {
      my ($id, $body) = ($1, $2); my $n = 0;
      while ($body =~ /<g class="mark-symbol role-mark[^>]*>(.*?)<\/g>/sg) { my $g = $1; $n += () = $g =~ /<path/g; }
      print "$id $n\n"; }' "$1"
}

# check_page NAME RESULT.json EXPECTED_PLOTS: renders the result and checks it in Chromium.
check_page() {
  "$RENDER" "$2" "$WORK/$1.md" "$WORK/$1.html" || fail "$1: the report was not written"
  check_html "$1" "$WORK/$1.html" "$3"
}

# The fixture: 6 FOM distributions + overview + cold start + 2 scenarios.
check_page fixture "$FIXTURE" 10
symbols_per_plot "$WORK/fixture.dom.html" >"$WORK/symbols"
# One dot per valid sample: 10 blocks x 2 sides; the latency FOM lost one launch (null);
# the site workload's FOM has no sample at all; cold start 3 x 5 launches; the overview one
# dot per FOM that has an overhead (5 of 6).
for want in "plot-fom-0-0 20" "plot-fom-2-0 19" "plot-fom-3-0 0" "plot-cold-start 15" "plot-overview 5"; do
  grep -qx "$want" "$WORK/symbols" || fail "expected '$want' in the drawn plots, got: $(tr '\n' ';' <"$WORK/symbols")"
done
grep -q '&lt;script&gt;alert' "$WORK/fixture.dom.html" || fail "the hostile workload name is not shown as text"

# A run with only the required parts, in another mode: one FOM and the overview.
cat >"$WORK/minimal.json" <<'EOF'
{"format": "ctr-bench-result", "version": 1, "mode": "image-vs-host", "cold_start": null,
 "workloads": [{"name": "stream", "status": "ok", "labels": {"A": "host build", "B": "image build"},
   "foms": [{"name": "triad", "unit": "MB/s", "direction": "higher", "delta": 0.03,
     "samples": {"A": [14000, 14100, null], "B": [15100, 15150, 15120]},
     "analysis": {"overhead": -0.07, "ci": [-0.08, -0.06], "verdict": "PASS",
                  "median": {"A": 14050, "B": 15120}}}]}]}
EOF
check_page minimal "$WORK/minimal.json" 2
grep -q 'Image stack delta' "$WORK/minimal.dom.html" || fail "the image-vs-host page does not say it measures a stack delta"

echo "PASS: $TEST_NAME"
