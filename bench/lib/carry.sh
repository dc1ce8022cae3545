# Sourced by the scripts that carry a build to a machine without Debian's packages (a GPU
# node: bench/gpu/acceptance.sh, bench/io/pack.sh).

# copy_with_libs PROGRAM DIR: PROGRAM into DIR, the shared libraries it needs (but glibc's)
# into DIR/lib, its RUNPATH set to $ORIGIN/lib.
copy_with_libs() {
  local prog=$1 dir=$2 lib
  mkdir -p "$dir/lib"
  [ "$(realpath "$prog")" = "$(realpath -m "$dir/$(basename "$prog")")" ] || cp "$prog" "$dir/"
  for lib in $(ldd "$prog" | awk '$3 ~ /^\// {print $3}'); do
    case $(basename "$lib") in libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*) continue ;; esac
    cp -L "$lib" "$dir/lib/"
  done
  patchelf --set-rpath '$ORIGIN/lib' "$dir/$(basename "$prog")"
}
