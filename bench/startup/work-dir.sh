# Sourced by the start-up benchmarks: `work_dir NAME` makes a scratch directory
# /tmp/NAME.XXXXXX, cds into it and removes it at exit, after killing the launches whose
# pids the script added to `holders` (the launches that keep an image mounted).
holders=()
work_dir() {
  work=$(mktemp -d "/tmp/$1.XXXXXX")
  trap 'for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT
  cd "$work"
}
