#!/bin/bash
# Every source compiles on its own, as a packager's plain build compiles it (no preset:
# CTR_UNITY_BUILD=OFF, what Spack, EasyBuild and distributions build). The presets compile
# each module as one unity source, where a header one file includes serves the next file
# too: a missing include compiles there and fails the plain build (issue 52). This
# configures that build in DIR (default build/each), builds its precompiled headers, and
# runs each C and C++ compile command of src/ and tests/ with -fsyntax-only (the compiler's
# every check, no code generation: a quarter of a plain build's time), both cores busy.
# Prints each source that fails with its first errors; exit status 1 if any does.
# Usage: tests/compile-each-source.sh [DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$src/build/each}
# CTR_CONFIG_KEYS_INC: the helper's generated key list from another build of this tree (run-all
# passes the ci preset's), instead of building ctr's config library here to write it.
cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCTR_UNITY_BUILD=OFF \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCTR_CONFIG_KEYS_INC="${CTR_CONFIG_KEYS_INC:-}" >/dev/null
# The precompiled headers the plain build compiles every file with.
mapfile -t pch < <(ninja -C "$dir" -t targets all | sed -n 's/^\([^:]*cmake_pch\.hxx\.gch\): .*/\1/p')
[ "${#pch[@]}" = 0 ] || ninja -C "$dir" "${pch[@]}" >/dev/null
# Generated sources the others include: the helper's list of ctr.conf keys (src/helper).
ninja -C "$dir" ctr-config-keys-inc >/dev/null
python3 - "$dir/compile_commands.json" "$src" "$(nproc)" <<'PY'
import concurrent.futures, json, os, shlex, subprocess, sys, time

commands, source_dir, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])

def syntax_only(entry):
    """The entry's compile command without its output and dependency file, checking only."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MT", "-MF", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        out.append(a)
    return out + ["-fsyntax-only"]

def ours(path):
    path = os.path.realpath(path)
    # tests/layering's probes are meant not to compile (an include that runs upward).
    return any(path.startswith(os.path.join(source_dir, d) + os.sep) for d in ("src", "tests")) and \
        not path.startswith(os.path.join(source_dir, "tests", "layering") + os.sep)

entries = [e for e in json.load(open(commands)) if ours(e["file"])]

def check(entry):
    t0 = time.monotonic()
    r = subprocess.run(syntax_only(entry), cwd=entry["directory"], capture_output=True, text=True)
    return entry["file"], r.returncode, r.stderr, time.monotonic() - t0

failed, took = 0, []
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    for path, rc, err, seconds in pool.map(check, entries):
        took.append((seconds, os.path.relpath(path, source_dir)))
        if rc != 0:
            failed += 1
            lines = [l for l in err.splitlines() if "error" in l][:5] or err.splitlines()[:5]
            print(f"FAILED: {os.path.relpath(path, source_dir)}\n  " + "\n  ".join(lines))
# Where this stage's time goes (it counts against CI's 30 minutes): the slowest files.
print("slowest: " + ", ".join(f"{name} {seconds:.1f} s" for seconds, name in sorted(took, reverse=True)[:5]) +
      f"; {sum(t for t, _ in took):.0f} s of compiler time in all")
print(f"{len(entries)} sources compiled on their own, {failed} failed")
sys.exit(1 if failed else 0)
PY
