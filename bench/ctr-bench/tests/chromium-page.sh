# shellcheck shell=bash
# Sourced by tests/integration/test_ctr_bench.sh and test_ctr_bench_report.sh (after lib.sh:
# $WORK, note, fail): a ctr-bench HTML report checked in a real headless Chromium.
#   check_html NAME PAGE.html EXPECTED_PLOTS
# dumps the DOM after Vega has run and checks that the page planned and rendered exactly
# EXPECTED_PLOTS plots, none failed, each is a Vega SVG, and nothing from the result file ran
# as script; then takes a 1400 px wide screenshot ($WORK/NAME.png) and checks that it is a
# PNG that is not nearly blank. Leaves $WORK/NAME.dom.html for further checks.
# CTR_BENCH_REPORT_KEEP=DIR keeps the pages, DOM dumps and screenshots there.

# Chromium as root needs --no-sandbox; its own profile per test, so parallel runs do not
# share a lock. The virtual time budget lets Vega's promises settle before the dump.
browse() {
  timeout 180 chromium --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$WORK/chromium-profile" --virtual-time-budget=15000 "$@" 2>"$WORK/chromium.log" ||
    { cat "$WORK/chromium.log" >&2; fail "chromium failed ($*)"; }
}

body_attr() { grep -o '<body[^>]*>' "$1" | sed -n "s/.*$2=\"\\([^\"]*\\)\".*/\\1/p"; }

check_html() {
  local name=$1 page=$2 expected=$3 dom=$WORK/$1.dom.html
  [ -s "$page" ] || fail "$name: no page at $page"
  browse --dump-dom "file://$page" >"$dom"
  local rendered failed svgs
  rendered=$(body_attr "$dom" data-plots-rendered)
  failed=$(body_attr "$dom" data-plots-failed)
  [ -n "$rendered" ] || fail "$name: the page never reported its plots (Vega did not finish): $(grep -o '<body[^>]*>' "$dom")"
  [ "$(body_attr "$dom" data-plots-expected)" = "$expected" ] || fail "$name: the page planned $(body_attr "$dom" data-plots-expected) plots, expected $expected"
  [ "$rendered" = "$expected" ] || fail "$name: $rendered of $expected plots rendered; failed: $failed"
  [ -z "$failed" ] || fail "$name: plots failed: $failed"
  svgs=$(grep -o '<svg[^>]*class="marks"' "$dom" | wc -l)
  [ "$svgs" = "$expected" ] || fail "$name: $svgs Vega SVGs in the DOM, expected $expected"
  if grep -q 'data-pwned' "$dom"; then fail "$name: a script from the result file ran"; fi
  browse --window-size=1400,3000 --screenshot="$WORK/$name.png" "file://$page"
  [ "$(head -c 8 "$WORK/$name.png" | od -An -c | tr -d ' ')" = '211PNG\r\n032\n' ] || fail "$name: no PNG screenshot"
  # A page whose plots or styles did not draw is a near-blank image of a few KiB.
  [ "$(stat -c %s "$WORK/$name.png")" -gt 60000 ] || fail "$name: the screenshot is nearly blank ($(stat -c %s "$WORK/$name.png") bytes)"
  if [ -n "${CTR_BENCH_REPORT_KEEP:-}" ]; then
    mkdir -p "$CTR_BENCH_REPORT_KEEP" && cp "$page" "$dom" "$WORK/$name.png" "$CTR_BENCH_REPORT_KEEP/"
  fi
  note "$name: $rendered/$expected plots rendered in Chromium"
}
