# What the plugin does as root trusts nothing the job's user controls: the keeper's pid
# comes from what a ctr run as the user printed, with the user's environment (an
# LD_PRELOAD in it could make that ctr print anything). Here a ctr that claims a process
# of root's as the step container's keeper: the task cannot join it (its namespaces are
# not the claimed ones) and fails with one line, and the step's end, which signals the
# keeper, does so as the user: root's process lives on.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
require_slurm_cluster
ensure_test_user
sleep 600 &
victim=$!
start=$(sed 's/.*) //' "/proc/$victim/stat" | awk '{ print $20 }')
fake=$WORK/subverted-ctr
cat > "$fake" <<S
#!/bin/sh
case "\$1 \$2" in
  "instance start") printf 'name=x\nkeeper=$victim\nkeeper_start=$start\nns=user:1\nns=mnt:2\nno_new_privs=1\n' ;;
esac
S
chmod 755 "$fake"
conf=$CLUSTER/etc/plugstack.conf
cp "$conf" "$WORK/plugstack.conf.saved"
restore() { cp "$WORK/plugstack.conf.saved" "$conf"; kill "$victim" 2>/dev/null || true; rm -rf "$WORK"; }
trap restore EXIT
sed -i "s|ctr=[^ ]*|ctr=$fake|" "$conf"

set +e; err=$(slurm_as_user "$WORK" srun -N1 -n1 --container-image="$WORK/any.sif" true 2>&1); rc=$?; set -e
expect_eq "the step fails" 255 "$rc"
expect_contains "the task says why" "has ended" "$err"
sleep 1  # the step's end has run by now
kill -0 "$victim" 2>/dev/null || fail "root's process $victim was signalled by the plugin"
echo "PASS: $TEST_NAME"
