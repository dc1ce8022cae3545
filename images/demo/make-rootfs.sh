#!/bin/sh
# Builds the embedded demo root filesystem from Debian's busybox-static: no network, no
# root needed. Usage: make-rootfs.sh DIR   (DIR must not exist or be empty)
set -eu
out=${1:?usage: make-rootfs.sh DIR}
busybox=/bin/busybox
[ -x "$busybox" ] || { echo "make-rootfs.sh: $busybox missing (apt-get install busybox-static)" >&2; exit 1; }
mkdir -p "$out"
cd "$out"
mkdir -p bin sbin usr/bin usr/sbin etc dev proc sys tmp home root run var/tmp .singularity.d/env
chmod 1777 tmp var/tmp
cp "$busybox" bin/busybox
# One link per applet, so `ctr exec demo.sif ls` works as in any distribution.
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] && continue
  ln -sf busybox "bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' > etc/passwd
printf 'root:x:0:\n' > etc/group
: > etc/hosts
: > etc/resolv.conf
printf 'NAME="ctr demo (busybox)"\nID=ctr-demo\n' > etc/os-release
# Apptainer layout, so the demo image exercises the same code paths as Apptainer images.
cat > .singularity.d/runscript <<'RS'
#!/bin/sh
echo "Hello from the ctr demo container: $(uname -sr), $(busybox | head -1 | cut -d' ' -f1-2)"
echo "running as $(id -un 2>/dev/null || id -u) in $(pwd)"
exec "$@"
RS
chmod 755 .singularity.d/runscript
printf '#!/bin/sh\nexport CTR_DEMO=1\n' > .singularity.d/env/90-environment.sh
chmod 755 .singularity.d/env/90-environment.sh
printf '{\n  "org.label-schema.name": "ctr-demo",\n  "org.label-schema.description": "busybox demo image"\n}\n' > .singularity.d/labels.json
ln -sf .singularity.d/runscript singularity
