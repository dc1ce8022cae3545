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

# Chromium as root needs --no-sandbox; its own profile per test, so parallel runs do not
# share a lock. The virtual time budget lets Vega's promises settle before the dump.
browse() {
  timeout 180 chromium --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$WORK/chromium-profile" --virtual-time-budget=15000 "$@" 2>"$WORK/chromium.log" ||
    { cat "$WORK/chromium.log" >&2; fail "chromium failed ($*)"; }
}

# The number of Vega symbols (dots) drawn inside each plot container, as "id count" lines.
symbols_per_plot() {
  perl -0ne 'while (/id="(plot-[^"]+)"(.*?)(?=id="plot-|<\/main>)/sg) {
      my ($id, $body) = ($1, $2); my $n = 0;
      while ($body =~ /<g class="mark-symbol role-mark[^>]*>(.*?)<\/g>/sg) { my $g = $1; $n += () = $g =~ /<path/g; }
      print "$id $n\n"; }' "$1"
}

body_attr() { grep -o '<body[^>]*>' "$1" | sed -n "s/.*$2=\"\\([^\"]*\\)\".*/\\1/p"; }

# check_page NAME RESULT.json EXPECTED_PLOTS: renders the result and checks it in Chromium.
check_page() {
  local name=$1 result=$2 expected=$3 dom=$WORK/$1.dom.html
  "$RENDER" "$result" "$WORK/$name.md" "$WORK/$name.html" || fail "$name: the report was not written"
  browse --dump-dom "file://$WORK/$name.html" >"$dom"
  local rendered failed svgs
  rendered=$(body_attr "$dom" data-plots-rendered)
  failed=$(body_attr "$dom" data-plots-failed)
  [ -n "$rendered" ] || fail "$name: the page never reported its plots (Vega did not finish): $(grep -o '<body[^>]*>' "$dom")"
  [ "$rendered" = "$expected" ] || fail "$name: $rendered of $expected plots rendered; failed: $failed"
  [ "$(body_attr "$dom" data-plots-expected)" = "$expected" ] || fail "$name: the page planned $(body_attr "$dom" data-plots-expected) plots, expected $expected"
  [ -z "$failed" ] || fail "$name: plots failed: $failed"
  svgs=$(grep -o '<svg[^>]*class="marks"' "$dom" | wc -l)
  [ "$svgs" = "$expected" ] || fail "$name: $svgs Vega SVGs in the DOM, expected $expected"
  if grep -q 'data-pwned' "$dom"; then fail "$name: a script from the result file ran"; fi
  browse --window-size=1400,3000 --screenshot="$WORK/$name.png" "file://$WORK/$name.html"
  [ "$(head -c 8 "$WORK/$name.png" | od -An -c | tr -d ' ')" = '211PNG\r\n032\n' ] || fail "$name: no PNG screenshot"
  # A page whose plots or styles did not draw is a near-blank image of a few KiB.
  [ "$(stat -c %s "$WORK/$name.png")" -gt 60000 ] || fail "$name: the screenshot is nearly blank ($(stat -c %s "$WORK/$name.png") bytes)"
  if [ -n "${CTR_BENCH_REPORT_KEEP:-}" ]; then
    mkdir -p "$CTR_BENCH_REPORT_KEEP" && cp "$WORK/$name".* "$CTR_BENCH_REPORT_KEEP/"
  fi
  note "$name: $rendered/$expected plots rendered in Chromium"
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
