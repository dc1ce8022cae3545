#!/bin/sh
# Builds a root filesystem laid out the way Apptainer builds images, on top of the busybox
# demo root: environment scripts (a base one, %environment extending PATH, the app
# selector, the LD_LIBRARY_PATH/PS1 defaults, the runtime PATH variables), a runscript, a
# %test, a startscript, labels, the definition file, help, one SCIF app ("tool") and
# symbolic links in /var and /etc as distribution images have them. Written for ctr's
# tests (our own content, not Apptainer's templates). Usage: make-rootfs.sh DIR
set -eu
out=${1:?usage: make-rootfs.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
sh "$here/../demo/make-rootfs.sh" "$out"
cd "$out"
rm -f .singularity.d/env/90-environment.sh singularity
mkdir -p .singularity.d/libs opt/fixture/bin run var
printf '#!/bin/sh\necho fixture-tool "$@"\n' > opt/fixture/bin/fixture-tool
chmod 755 opt/fixture/bin/fixture-tool
# Distribution-style links: /var/run into /run, /etc/mtab into /proc; and the links
# Apptainer's bind tests go through: /var/etc to /etc, /etc/madness to /madness.
ln -s ../run var/run
ln -s ../proc/self/mounts etc/mtab
ln -s ../etc var/etc
ln -s /madness etc/madness

env=.singularity.d/env
printf '#!/bin/sh\n# base environment of the fixture image (nothing to set)\n' > $env/01-base.sh
cat > $env/90-environment.sh <<'S'
#!/bin/sh
# %environment of the fixture's definition file
export PATH="$PATH:/opt/fixture/bin"
export FIXTURE_ENV=from-environment
S
cat > $env/94-appsbase.sh <<'S'
#!/bin/sh
# the image's apps, as the build records them
SCIF_APPROOT_tool=/scif/apps/tool
SCIF_APPDATA_tool=/scif/data/tool
export SCIF_APPROOT_tool SCIF_APPDATA_tool
S
cat > $env/95-apps.sh <<'S'
#!/bin/sh
# the selected app (--app NAME): its bin first in PATH, its lib in LD_LIBRARY_PATH,
# its own environment
if [ -n "${SINGULARITY_APPNAME:-}" ]; then
    export SINGULARITY_APPNAME
    if [ -d "/scif/apps/$SINGULARITY_APPNAME" ]; then
        SCIF_APPS=/scif/apps
        SCIF_APPROOT="/scif/apps/$SINGULARITY_APPNAME"
        export SCIF_APPS SCIF_APPROOT
        PATH="/scif/apps/$SINGULARITY_APPNAME/bin:$PATH"
        if [ -f "/scif/apps/$SINGULARITY_APPNAME/scif/env/90-environment.sh" ]; then
            . "/scif/apps/$SINGULARITY_APPNAME/scif/env/90-environment.sh"
        fi
        export PATH
    fi
fi
S
cat > $env/99-base.sh <<'S'
#!/bin/sh
# library path of injected host libraries, and a prompt
if [ -z "${LD_LIBRARY_PATH:-}" ]; then
    LD_LIBRARY_PATH=/.singularity.d/libs
else
    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/.singularity.d/libs"
fi
if [ -z "${PS1:-}" ]; then
    PS1="Fixture> "
fi
export LD_LIBRARY_PATH PS1
S
cat > $env/99-runtimevars.sh <<'S'
#!/bin/sh
# PATH changes asked for at run time
if [ -n "${SING_USER_DEFINED_PREPEND_PATH:-}" ]; then
    PATH="$SING_USER_DEFINED_PREPEND_PATH:$PATH"
fi
if [ -n "${SING_USER_DEFINED_APPEND_PATH:-}" ]; then
    PATH="$PATH:$SING_USER_DEFINED_APPEND_PATH"
fi
if [ -n "${SING_USER_DEFINED_PATH:-}" ]; then
    PATH="$SING_USER_DEFINED_PATH"
fi
unset SING_USER_DEFINED_PREPEND_PATH SING_USER_DEFINED_APPEND_PATH SING_USER_DEFINED_PATH
export PATH
S
chmod 755 $env/*.sh

cat > .singularity.d/runscript <<'S'
#!/bin/sh
echo "fixture runscript: $*"
S
cat > .singularity.d/test <<'S'
#!/bin/sh
echo "fixture test: FIXTURE_ENV=$FIXTURE_ENV"
[ -x /opt/fixture/bin/fixture-tool ]
S
cat > .singularity.d/startscript <<'S'
#!/bin/sh
echo "fixture startscript"
S
chmod 755 .singularity.d/runscript .singularity.d/test .singularity.d/startscript
ln -s .singularity.d/runscript singularity
cat > .singularity.d/labels.json <<'S'
{
  "org.label-schema.name": "ctr-apptainer-fixture",
  "org.label-schema.build-arch": "amd64",
  "Author": "ctr tests"
}
S
cat > .singularity.d/Singularity <<'S'
Bootstrap: localimage
From: demo.sif

%environment
    export PATH="$PATH:/opt/fixture/bin"
    export FIXTURE_ENV=from-environment

%runscript
    echo "fixture runscript: $*"

%test
    echo "fixture test: FIXTURE_ENV=$FIXTURE_ENV"
    [ -x /opt/fixture/bin/fixture-tool ]

%labels
    Author ctr tests

%help
    The fixture image of ctr's Apptainer compatibility tests.

%apprun tool
    echo "tool runscript: $*"

%apptest tool
    echo "tool test"

%appenv tool
    export TOOL_ENV=from-tool

%applabels tool
    Tool-Version 1.0

%apphelp tool
    The fixture's app.
S
printf 'The fixture image of ctr'"'"'s Apptainer compatibility tests.\n' > .singularity.d/runscript.help

# One SCIF app.
app=scif/apps/tool
mkdir -p $app/bin $app/lib $app/scif/env scif/data/tool/input scif/data/tool/output
printf '#!/bin/sh\necho "tool binary: $*"\n' > $app/bin/tool-bin
printf '#!/bin/sh\necho "tool runscript: $*"\n' > $app/scif/runscript
printf '#!/bin/sh\necho "tool test"\n' > $app/scif/test
printf '#!/bin/sh\nexport TOOL_ENV=from-tool\n' > $app/scif/env/90-environment.sh
printf '{\n  "Tool-Version": "1.0"\n}\n' > $app/scif/labels.json
printf 'The fixture'"'"'s app.\n' > $app/scif/runscript.help
chmod 755 $app/bin/tool-bin $app/scif/runscript $app/scif/test $app/scif/env/90-environment.sh
