# Debian packages a script needs, installed once. Sourced by scripts/setup and
# scripts/lib/kubernetes-build.bash; the sourcing script defines say.

# ensure_packages PACKAGE...: installs those not installed.
ensure_packages() {
  local package missing=()
  for package in "$@"; do
    # dpkg -s also succeeds for removed packages whose config files remain; check the status.
    if [[ $(dpkg-query -W -f='${Status}' "$package" 2>/dev/null) != "install ok installed" ]]; then
      missing+=("$package")
    fi
  done
  ((${#missing[@]})) || return 0
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
