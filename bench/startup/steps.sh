# Sourced by bench/startup scripts. step_medians NAME RUNS CTR-EXEC-ARGS...: ctr's own step
# times (`ctr -d`'s "launch steps:" line) over RUNS launches, the median of each step, on
# one line: "NAME: STEP MS; STEP MS; ...". Needs $ctr.
step_medians() {
  local name=$1 runs=$2 line step med
  shift 2
  # "launch steps: STEP 0.154 ms, STEP 0.551 ms, ...; total 3.844 ms since ctr started" -> "STEP<tab>MS"
  for _ in $(seq "$runs"); do "$ctr" -d exec "$@" 2>&1 | grep 'launch steps:' || true; done |
    sed 's/.*launch steps: //; s/ since ctr started//; s/; /, /' | tr ',' '\n' | sed 's/^ *//' |
    sed -n 's/^\(.*\) \([0-9.]*\) ms$/\1\t\2/p' > "${TMPDIR:-/tmp}/steps.$$.tsv"
  line="$name:"
  while IFS= read -r step; do
    med=$(awk -F'\t' -v s="$step" '$1 == s { print $2 }' "${TMPDIR:-/tmp}/steps.$$.tsv" | sort -n |
          awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    line="$line $step $med;"
  done < <(cut -f1 "${TMPDIR:-/tmp}/steps.$$.tsv" | awk '!seen[$0]++')
  rm -f "${TMPDIR:-/tmp}/steps.$$.tsv"
  echo "$line"
}
