# Builds Kubernetes v1.20.2 binaries from Debian bookworm's source package `kubernetes`
# (1.20.5+really1.20.2, the v1.20.2 tree with its vendor/) with Debian's Go 1.19, the way
# Debian's debian/rules builds it, into a cache outside the repository. No registry this project
# reaches ships kube-apiserver, the kubelet or the conformance suite's e2e.test.
# Sourced by scripts/control-plane (the control plane and the reference kubelet) and
# scripts/conformance (e2e.test, ginkgo, agnhost). The sourcing script defines say and die, and
# calls build_cleanup from its EXIT trap.
#
#   PODWRIGHT_K8S_CACHE  the built binaries, in bin/ (default
#                        /var/cache/podwright/kubernetes-v1.20.2); also the source tarball

readonly k8s_version=v1.20.2
cache=${PODWRIGHT_K8S_CACHE:-/var/cache/podwright/kubernetes-$k8s_version}
cache=${cache%/}
# Debian's source package; the orig tarball is the upstream tree, whatever Debian's revision.
readonly orig_tarball=kubernetes_1.20.5+really1.20.2.orig.tar.gz
readonly orig_sha256=b83c0780efb182d928dc63d46488a847f161f04e40a94b96bf5247dd671ecdfc
readonly go_bin=/usr/lib/go-1.19/bin

# shellcheck source=scripts/lib/packages.bash
source "$(dirname "${BASH_SOURCE[0]}")/packages.bash"

# The tree of a build and its make, for build_cleanup: stopped and removed on any exit, also an
# interrupted one. After a SIGKILL of the script, make goes on in its own session holding the
# build lock, and the next build waits for it, then removes the tree first.
build_dir=
build_pid=
build_cleanup() {
  if [[ -n $build_pid ]]; then
    kill -TERM -- "-$build_pid" 2>/dev/null || true
    wait "$build_pid" 2>/dev/null || true
  fi
  if [[ -n $build_dir && -d $build_dir ]]; then
    rm -rf "$build_dir"
  fi
}

# missing_binaries NAME...: those not in $cache/bin.
missing_binaries() {
  local binary
  for binary in "$@"; do
    [[ -x $cache/bin/$binary ]] || echo "$binary"
  done
}

# make_target NAME: what `make WHAT=` builds NAME from.
make_target() {
  case $1 in
    e2e.test) echo test/e2e/e2e.test ;;
    agnhost) echo test/images/agnhost ;;
    nonewprivs) echo test/images/nonewprivs ;;
    ginkgo) echo vendor/github.com/onsi/ginkgo/ginkgo ;;
    *) echo "cmd/$1" ;;
  esac
}

# check_built NAME PATH: that the binary runs and says the version of this tree (the test
# suite's tools have versions of their own: the vendored ginkgo 1.11.0, agnhost 2.25; the
# nonewprivs image's nnp only says its effective uid).
check_built() {
  local name=$1 built=$2 version want
  case $name in
    kubectl) version=$("$built" version --client --short 2>/dev/null || true) want="*$k8s_version" ;;
    ginkgo) version=$("$built" version 2>/dev/null || true) want="Ginkgo Version *" ;;
    agnhost) version=$("$built" --version 2>/dev/null || true) want="*version 2.*" ;;
    nonewprivs) version=$("$built" 2>/dev/null || true) want="Effective uid: *" ;;
    *) version=$("$built" --version 2>/dev/null || true) want="*$k8s_version" ;;
  esac
  # shellcheck disable=SC2053 # want is a pattern
  [[ $version == $want ]] || die "$name says '$version', not $want"
}

# Downloads Debian's source package into $cache/source with a private apt configuration: the
# system's sources (binary packages only, and not ours to change) stay as they are.
download_source() {
  local source=$cache/source apt_dir
  if [[ -f $source/$orig_tarball ]] && sha256sum -c --status <<<"$orig_sha256  $source/$orig_tarball"; then
    return 0
  fi
  say "downloading Debian bookworm's source package kubernetes (34 MB)"
  apt_dir=$(mktemp -d)
  mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$apt_dir/download"
  cat >"$apt_dir/sources.list.d/debian-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # No package caches: apt would otherwise rewrite the system's with these lists. Sandbox user
  # root: the private directories are root's, and _apt could not write to them.
  local apt_options=(
    -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt_dir/sources.list.d"
    -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
    -o APT::Sandbox::User=root
  )
  apt-get "${apt_options[@]}" update -qq >&2
  (cd "$apt_dir/download" && apt-get "${apt_options[@]}" source --download-only -qq kubernetes >&2)
  if ! sha256sum -c --status <<<"$orig_sha256  $apt_dir/download/$orig_tarball"; then
    rm -rf "$apt_dir"
    die "Debian's source package has no $orig_tarball with sha256 $orig_sha256"
  fi
  mkdir -p "$source"
  # The .dsc and the Debian changes are kept beside it for reference (22 kB).
  mv "$apt_dir"/download/* "$source/"
  rm -rf "$apt_dir"
}

# build_binaries NAME...: builds those of NAME missing from $cache/bin; each is moved there only
# when it works, so an interrupted build leaves nothing half-written and the next run builds
# just what is missing. Holds $cache/build.lock (descriptor 8) while it builds.
build_binaries() {
  # Nothing to build: no waiting for another caller's build of other binaries.
  [[ -n $(missing_binaries "$@") ]] || return 0
  mkdir -p "$cache/bin"
  # Another caller (another state directory's `up`, scripts/conformance) may build at the same
  # time: one builds, the other waits.
  exec 8>"$cache/build.lock"
  flock 8
  local missing
  mapfile -t missing < <(missing_binaries "$@")
  if ((${#missing[@]} == 0)); then
    exec 8>&-
    return 0
  fi
  local started=$SECONDS
  say "building ${missing[*]} ($k8s_version) into $cache/bin, once"
  ensure_packages golang-1.19-go golang-github-modern-go-reflect2-dev rsync make
  download_source

  build_dir=$cache/build
  rm -rf "$build_dir"
  mkdir -p "$build_dir/home"
  say "unpacking the source"
  tar xzf "$cache/source/$orig_tarball" -C "$build_dir"
  local tree=$build_dir/kubernetes-${k8s_version#v}
  [[ -d $tree/cmd/kube-apiserver ]] || die "unexpected tarball layout: no $tree/cmd/kube-apiserver"

  # The vendored reflect2 1.0.1 crashes in map iteration with Go >= 1.18 (modern-go/reflect2#24,
  # json-iterator/go#608): put Debian's 1.0.2 in its place. Delete the old files first: copying
  # over them leaves go_above_17.go beside 1.0.2's go_above_19.go ("resolveTypeOff redeclared").
  # -mod=vendor does not hash vendored files, so modules.txt can stay as it is.
  local reflect2=$tree/vendor/github.com/modern-go/reflect2 debian_reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
  rm -f "$reflect2"/*.go "$reflect2"/*.s
  find "$debian_reflect2" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' \
    -exec cp {} "$reflect2/" \;

  # As Debian's debian/rules: a GOPATH holding the tree as k8s.io/kubernetes, and make. A plain
  # `go build -mod=vendor` fails ("updates to go.mod needed, disabled by -mod=vendor"). The
  # version (v1.20.2) comes from the git-archive values in hack/lib/version.sh, no git needed.
  # rsync is needed by the build scripts: without it the code generators are never built and
  # make fails with "Permission denied" on _output/bin/prerelease-lifecycle-gen.
  mkdir -p "$tree/.go/src/k8s.io"
  ln -s ../../.. "$tree/.go/src/k8s.io/kubernetes"
  local log=$cache/build.log binary stage
  : >"$log"
  for binary in "${missing[@]}"; do
    stage=$SECONDS
    say "building $binary (log: $log)"
    # nice 19: the machine has 2 cores, and other work must keep going. GOFLAGS unset and no
    # module proxy: everything comes from vendor/. GOCACHE in the build's HOME, removed with it.
    # make runs in a session of its own, in the background: bash runs a trap only once the
    # foreground command is done, so a SIGTERM would otherwise wait minutes for make; the trap
    # stops make's whole process group instead.
    (cd "$tree/.go/src/k8s.io/kubernetes" &&
      exec setsid env -u GOFLAGS -u GOROOT -u GOCACHE -u GOMODCACHE -u GO111MODULE \
        HOME="$build_dir/home" GOPATH="$tree/.go" GOPROXY=off CGO_ENABLED=0 PATH="$go_bin:$PATH" \
        nice -n 19 make WHAT="$(make_target "$binary")") </dev/null >>"$log" 2>&1 9>&- &
    build_pid=$!
    if ! wait "$build_pid"; then
      build_pid=
      tail -n 30 "$log" >&2
      die "building $binary failed (log: $log)"
    fi
    build_pid=
    say "built $binary in $((SECONDS - stage)) s"
  done

  local built
  for binary in "${missing[@]}"; do
    built=$tree/_output/local/bin/linux/amd64/$binary
    [[ -x $built ]] || built=$tree/_output/bin/$binary
    [[ -x $built ]] || die "make did not produce $binary"
    check_built "$binary" "$built"
    # Copy beside, then rename: a reader never sees a partial binary.
    cp "$built" "$cache/bin/.$binary.new"
    mv -f "$cache/bin/.$binary.new" "$cache/bin/$binary"
  done
  rm -rf "$build_dir"
  build_dir=
  exec 8>&-
  say "built ${missing[*]} in $((SECONDS - started)) s; the build tree is removed"
}
