#!/usr/bin/env bash
# Builds NCCL's example profiler plugin (ext-profiler/example) from NCCL's
# public sources into a directory OUTSIDE this repository, for the overhead
# benchmark. Nothing of NCCL's is copied into the repository.
#
# Usage: build_nccl_example.sh NCCL_GIT_DIR OUT_DIR [TAG]
#   NCCL_GIT_DIR  a git directory of github.com/NVIDIA/nccl (bare or not)
#   OUT_DIR       where libnccl-profiler-example.so goes (created)
#   TAG           default v2.28.9-1 (its example exports ncclProfiler_v5)
# Needs a C++ compiler and CUDA's headers (cuda_runtime.h for cudaStream_t;
# CUDA_INC, default /usr/local/cuda/include); no GPU, no CUDA library.
#
# The upstream Makefile compiles without optimisation
# ($(CXX) -Inccl -I$(CUDA_INC) -fPIC -shared); for a fair comparison this
# builds with -O2, like our plugin's default build (debugoptimized).
set -euo pipefail
git_dir=${1:?NCCL git directory}
out=${2:?output directory}
tag=${3:-v2.28.9-1}
cuda_inc=${CUDA_INC:-/usr/local/cuda/include}
repo_root=$(cd "$(dirname "$0")/../../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
case "$out/" in
  "$repo_root"/*) echo "refusing to build inside the repository: $out" >&2; exit 2 ;;
esac
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git --git-dir="$git_dir" archive "$tag" ext-profiler/example | tar -x -C "$src"
"${CXX:-g++}" -O2 -fPIC -shared -I"$src/ext-profiler/example/nccl" -I"$cuda_inc" \
  -o "$out/libnccl-profiler-example.so" "$src"/ext-profiler/example/*.cc
echo "$out/libnccl-profiler-example.so (NCCL $tag, $(git --git-dir="$git_dir" rev-parse "$tag^{commit}"))"
