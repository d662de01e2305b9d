#!/usr/bin/env bash
# Builds the GPU validation kit's carried set on this Debian machine
# (docs/gpu-validation.md): configures build-gpukit/ (release, libstdc++ and
# libgcc linked statically into the plugins, no etcd backend), builds the kit's targets, copies them stripped into
# gpu-kit/ with a manifest, checks them with ldd, and prints the command to
# run on the GPU machine, the paths to copy there and its time limit.
#
# Usage: scripts/gpu/build_kit.sh   (BUILD_DIR=..., KIT_DIR=... to change the folders)
# Exit status: 0 the kit is ready; 1 the ldd or size check failed; 2 the build failed.
set -euo pipefail

cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpukit}
kit=${KIT_DIR:-gpu-kit}

packages=(meson ninja-build pkg-config g++ binutils python3 libcli11-dev nlohmann-json3-dev nettle-dev)
# shellcheck source=scripts/ensure_packages.sh
source scripts/ensure_packages.sh
ensure_packages "${packages[@]}"

# The plugins carry their own C++ runtime (NCCL's host process may have an
# older one); the programs and libresilient-restart.so share the machine's, one
# unwinder per process (two static copies broke exceptions thrown by the
# library through the demo's frames: std::terminate on the GPU machine).
options=(-Dbuildtype=release -Db_ndebug=false -Dtests=disabled -Detcd=disabled
  -Dplugin_static_runtime=true)
# A folder configured by an older kit links the C++ runtime statically into
# everything (cpp_link_args), which --reconfigure does not clear: start anew.
if [[ -f $build/meson-info/intro-buildoptions.json ]] && python3 - "$build" <<'PY'
import json, sys
opts = json.load(open(sys.argv[1] + "/meson-info/intro-buildoptions.json"))
sys.exit(0 if any(o["name"] == "cpp_link_args" and o["value"] for o in opts) else 1)
PY
then
  rm -rf "$build"
fi
if [[ -d $build ]]; then
  # Fresh introspection data, and the options above even on an older folder.
  meson setup --reconfigure "$build" "${options[@]}" >/dev/null || exit 2
else
  meson setup "$build" "${options[@]}" || exit 2
fi
mapfile -t outputs < <(python3 - "$build" <<'PY'
import json, os, subprocess, sys
sys.path.insert(0, "tests/gpu")
import kit
build = sys.argv[1]
targets = json.loads(subprocess.run(["meson", "introspect", "--targets", build], check=True,
                                    capture_output=True, text=True).stdout)
by_name = {t["name"]: t for t in targets}
for role, name in kit.ROLES.items():
    print(os.path.relpath(by_name[name]["filename"][0], os.path.abspath(build)))
PY
)
if ((${#outputs[@]} == 0)); then
  echo "== cannot list the kit's targets in $build (meson introspect)" >&2
  exit 2
fi
echo "== building the kit's targets in $build"
ninja -C "$build" "${outputs[@]}" || exit 2

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=()
if [[ -n $(git status --porcelain 2>/dev/null) ]]; then dirty=(--dirty); fi
status=0
python3 tests/gpu/kit.py assemble --build "$build" --kit "$kit" --commit "$commit" "${dirty[@]}" || status=$?
if ((status != 0)); then
  echo "== the kit in $kit is NOT usable (see the problems above)" >&2
  exit 1
fi
# The plan's budgets, a minute for validate.py's own work, never over what one
# device call takes (timeout_s <= 600).
limit=$(python3 -c 'import sys; sys.path.insert(0, "tests/gpu"); import validate; print(validate.device_call_timeout())')
cat <<MSG
== the kit is ready in $kit/
On the GPU machine, from the repository's root (the working tree, plus $kit/):
    bash scripts/gpu/validate.sh --out <folder for the report>
Copy: the repository's tracked files and $kit/ (with the device tool: carry ["$kit"], and --out \$OUT).
Time limit: ${limit} s (timeout_s of one device call; the plan's budgets: scripts/gpu/validate.sh --print-plan).
MSG
