#!/usr/bin/env bash
# Builds one test partner, a third-party NCCL net plugin, from its unmodified
# source archive into the build tree: extracts ARCHIVE into WORKDIR/src, runs
# the partner's own autotools recipe there (../shared/thirdparty/README.md)
# and installs it into WORKDIR/install. The thirdparty suite runs it, never
# ninja: the suite's first tests build, every later test finds the build
# done. It builds once: WORKDIR/stamp records what was built (the archive's
# and this script's checksums, the CUDA headers used) and a later run with
# the same inputs only says "cached". Runs under a lock on WORKDIR.lock.
#
# Exit status: 0 built (or cached), WORKDIR/library names the plugin library;
# 77 cannot be built here (no archive, no build dependency: the reason is
# printed); 1 the build failed (the end of WORKDIR/build.log is printed).
#
# usage: build_partner.sh aws-ofi-nccl|nccl-rdma-sharp-plugins ARCHIVE WORKDIR [CUDA_HOME]
set -euo pipefail

if (($# < 3 || $# > 4)); then
  sed -n 's/^# usage: /usage: /p' "$0" >&2
  exit 1
fi
partner=$1 archive=$2 workdir=$3 cuda=${4:-/usr/local/cuda}
jobs=2  # CI and the development machines have two cores (shared)

case $partner in
  aws-ofi-nccl) pkgs=(libfabric hwloc) library=lib/libnccl-net-ofi.so ;;
  nccl-rdma-sharp-plugins) pkgs=(ucx libibverbs) library=lib/libnccl-net.so ;;
  *) echo "build_partner.sh: unknown partner '$partner'" >&2; exit 1 ;;
esac

missing=()
[[ -f $archive ]] || missing+=("$archive")
for tool in tar make g++ pkg-config autoreconf automake libtoolize sha256sum flock; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
for pkg in "${pkgs[@]}"; do
  pkg-config --exists "$pkg" 2>/dev/null || missing+=("$pkg (pkg-config)")
done
[[ -f $cuda/include/cuda.h ]] || missing+=("CUDA headers ($cuda/include/cuda.h)")
if ((${#missing[@]} > 0)); then
  list=$(printf ', %s' "${missing[@]}")
  echo "SKIP: cannot build $partner here: missing ${list:2}"
  exit 77
fi

mkdir -p "$workdir"
exec 9>"$workdir.lock"
flock 9
inputs="$(sha256sum "$archive" "$0" | cut -d' ' -f1 | tr '\n' ' ')cuda=$cuda"
if [[ -f $workdir/stamp && $(<"$workdir/stamp") == "$inputs" && -f $workdir/library ]]; then
  echo "$partner: cached in $workdir (built from $archive)"
  exit 0
fi

# The partner's recipe, run in a fresh copy of its sources.
build() {
  rm -rf "$workdir/src" "$workdir/install"
  mkdir -p "$workdir/src"
  tar -xzf "$archive" -C "$workdir/src" --strip-components=1
  cd "$workdir/src"
  local configure=(--prefix="$workdir/install" --with-cuda="$cuda")
  case $partner in
    aws-ofi-nccl)
      # autogen takes the version from git unless this file holds it.
      local version=${archive##*/aws-ofi-nccl-}
      echo "${version%.tar.gz}" >.release_version
      # Not --with-libfabric=/usr nor --with-hwloc=/usr: -isystem /usr/include
      # breaks libstdc++; pkg-config finds them.
      configure+=(--enable-cudart-dynamic --disable-tests --disable-werror)
      ;;
    nccl-rdma-sharp-plugins)
      configure+=(--with-ucx=/usr)
      ;;
  esac
  ./autogen.sh
  ./configure "${configure[@]}"
  make -j"$jobs"
  make install
}

echo "$partner: building from $archive in $workdir (log: $workdir/build.log)"
rm -f "$workdir/stamp" "$workdir/library"
start=$SECONDS
if ! (build) >"$workdir/build.log" 2>&1; then
  echo "FAIL: building $partner failed after $((SECONDS - start)) s; the end of $workdir/build.log:"
  tail -n 20 "$workdir/build.log"
  exit 1
fi
if [[ ! -f $workdir/install/$library ]]; then
  echo "FAIL: the build of $partner made no $library"
  exit 1
fi
echo "$workdir/install/$library" >"$workdir/library"
echo "$inputs" >"$workdir/stamp"
echo "$partner: built in $((SECONDS - start)) s: $workdir/install/$library"
