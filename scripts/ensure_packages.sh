# Sourced by scripts/test.sh and scripts/demo.sh: ensure_packages PKG... installs
# with apt-get (after apt-get update) the Debian packages that are missing, as
# root or through sudo.
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} > 0)); then
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    echo "== installing: ${missing[*]}"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
      "${missing[@]}"
  fi
}
