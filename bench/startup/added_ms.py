#!/usr/bin/python3
"""What case B adds to case A in a launch-timer result (-j FILE), per block.

Usage: added_ms.py RESULT.json BLOCKS REPS A B
Prints "MEDIAN_A MEDIAN_B ADDED LOW HIGH" in ms: the medians of all samples of A and B,
and the median over blocks of median(B) - median(A) within each block (launch-timer runs
the cases interleaved in blocks, so a block's difference is free of the machine's drift),
with the smallest and largest per-block difference. Used by bench/startup/nv-overhead.sh
and bench/gpu/acceptance.sh.
"""
import json
import statistics
import sys

result, blocks, reps, a, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
cases = {c["name"]: c["samples_ms"] for c in json.load(open(result))["cases"]}
per = [statistics.median(cases[b][k * reps:(k + 1) * reps]) - statistics.median(cases[a][k * reps:(k + 1) * reps])
       for k in range(blocks)]
print(f"{statistics.median(cases[a]):.3f} {statistics.median(cases[b]):.3f} "
      f"{statistics.median(per):.3f} {min(per):.3f} {max(per):.3f}")
