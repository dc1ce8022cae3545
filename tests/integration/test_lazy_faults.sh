#!/bin/bash
# Issue 57, item 4: faults during a job that reads its image lazily (`ctr exec --lazy`), as
# the test user, against Debian's docker-registry on 127.0.0.1 with token authentication
# (tokens of 4 s here, so that one expires while the job runs):
#  - the token expires mid-job: the server asks the token service again (with the user's
#    registry credentials, as ctr did) and the reads go on;
#  - the registry goes away mid-job: a read of chunks not cached yet fails with EIO after the
#    retries, one line a chunk in the cache's log naming it and the URL; what is cached still reads; the
#    mount stays up, and once the registry is back the same job reads the rest;
#  - nothing is left behind once the job ends.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"
ensure_test_user
require_fuse
[ -x "$(dirname "$CTR_BIN")/ctr-squashfs" ] || skip "ctr-squashfs was not built here (it needs libsquashfs-dev and libfuse3-dev)"
use_linger 0
printf 'lazy prefetch = no\n' >> "$CTR_TEST_CONFIG"  # the chunks the job reads are fetched when it reads them
TUID=$(id -u "$CTR_TEST_USER")
cache=/var/tmp/ctr-lazy-$TUID
rm -rf "$cache"
trap 'kill ${REGISTRY_PID:-} ${TOKEN_PID:-} 2>/dev/null || true; pkill -KILL -u "$CTR_TEST_USER" -f /ctl/job.sh || true
      wait 2>/dev/null || true; rm -rf "$WORK" "$cache"' EXIT
export CTR_TEST_TOKEN_SECONDS=4
start_token_registry alice:s3cret
reg=$REGISTRY
make_user_dir

note "the image: the demo root, two 3 MiB files of random bytes, small files; pushed by ctr push as alice"
tree=$WORK/tree
make_demo_rootfs "$tree"
mkdir -p "$tree/data/small"
head -c 3145728 /dev/urandom > "$tree/data/one.bin"
head -c 3145728 /dev/urandom > "$tree/data/two.bin"
for i in $(seq 50); do echo "small file $i" > "$tree/data/small/f$i"; done
"$CTR_BIN" -q build "$WORK/app.sif" "$tree" >/dev/null || fail "could not build the SIF"
CTR_CONFIG=$CTR_TEST_CONFIG CTR_DOCKER_USERNAME=alice CTR_DOCKER_PASSWORD=s3cret "$CTR_BIN" -q push "$WORK/app.sif" "oras://$reg/lazy/app:1" ||
  fail "ctr push as alice failed"
chmod -R a+rX "$WORK"
mkdir -m 777 "$WORK/ctl"

# The job: reads a small file, then waits for the test's go-files, reading a big file at each;
# the statuses and sums it writes to $WORK/ctl. Its stderr (the server's lines among them).
cat > "$WORK/ctl/job.sh" <<'EOF'
#!/bin/sh
ctl=$1
cat /data/small/f1 > "$ctl/first"
for step in 1 2 3; do
  while [ ! -e "$ctl/go$step" ]; do [ -d "$ctl" ] || exit 1; sleep 0.05; done
  file=$(cat "$ctl/go$step")
  sha256sum "$file" > "$ctl/sum$step" 2>"$ctl/err$step"
  echo $? > "$ctl/rc$step"
done
EOF
chmod 755 "$WORK/ctl/job.sh"
# step N FILE: the job reads FILE; waits for its status. The go-file appears whole (written
# beside it, then renamed): the job, polling for it, could otherwise read it still empty.
step() {
  echo "$2" > "$WORK/ctl/.go$1" && mv "$WORK/ctl/.go$1" "$WORK/ctl/go$1"
  for _ in $(seq 600); do [ -s "$WORK/ctl/rc$1" ] && return 0; sleep 0.05; done
  fail "the job did not read $2 (step $1): $(cat "$WORK/job.err")"
}
as_user env CTR_DOCKER_USERNAME=alice CTR_DOCKER_PASSWORD=s3cret \
  "$CTR_BIN" exec --lazy -B "$WORK/ctl:/ctl" "oras://$reg/lazy/app:1" /ctl/job.sh /ctl >"$WORK/job.out" 2>"$WORK/job.err" &
job=$!
for _ in $(seq 200); do [ -s "$WORK/ctl/first" ] && break; sleep 0.05; done
expect_eq "the first read" "small file 1" "$(cat "$WORK/ctl/first" 2>/dev/null)"
tokens=$(grep -c "token for alice" "$TOKEN_LOG")

note "the token expires (4 s): the server asks for a new one and the read goes on"
sleep 5
step 1 /data/one.bin
expect_eq "step 1 status" 0 "$(cat "$WORK/ctl/rc1")"
expect_eq "one.bin" "$(sha256sum "$tree/data/one.bin" | cut -d' ' -f1)" "$(cut -d' ' -f1 "$WORK/ctl/sum1")"
[ "$(grep -c "token for alice" "$TOKEN_LOG")" -gt "$tokens" ] || fail "no new token was asked for: $(cat "$TOKEN_LOG")"

note "the registry goes away: EIO for what is not cached, one line a chunk; the cache still reads"
kill "$REGISTRY_PID"; wait "$REGISTRY_PID" 2>/dev/null || true
step 2 /data/two.bin
[ "$(cat "$WORK/ctl/rc2")" != 0 ] || fail "two.bin read with the registry gone"
expect_contains "the job's error" "Input/output error" "$(cat "$WORK/ctl/err2")"
log=$cache/$(sha256sum "$WORK/app.sif" | cut -d' ' -f1).log
grep -q "ctr-squashfs\[[0-9]*\]: oras://$reg/lazy/app:1: chunk [0-9]* of [0-9]* from http://$reg/v2/lazy/app/blobs/sha256:.*(after 4 tries): EIO" "$log" ||
  fail "no log line naming the chunk in $log: $(cat "$log" 2>&1)"
lines=$(grep -c "(after 4 tries): EIO" "$log")
chunks_failed=$(grep -o "chunk [0-9]* of" "$log" | sort -u | wc -l)
expect_eq "log lines, one a chunk" "$chunks_failed" "$lines"
as_user "$CTR_BIN" exec --lazy "oras://$reg/lazy/app:1" true 2>/dev/null &&
  fail "a new launch resolved the image with the registry gone"

note "the registry is back: the same job reads the rest"
docker-registry serve "$WORK/registry.yml" >>"$WORK/registry.log" 2>&1 &
REGISTRY_PID=$!
wait_http "http://$reg/v2/" 401 || fail "docker-registry did not start again"
step 3 /data/two.bin
expect_eq "step 3 status" 0 "$(cat "$WORK/ctl/rc3")"
expect_eq "two.bin" "$(sha256sum "$tree/data/two.bin" | cut -d' ' -f1)" "$(cut -d' ' -f1 "$WORK/ctl/sum3")"
wait "$job" || fail "the job ended with $?: $(cat "$WORK/job.err")"
job=
assert_nothing_left "lazy faults"
echo "PASS: $TEST_NAME"
