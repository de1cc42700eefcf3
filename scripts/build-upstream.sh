#!/usr/bin/env bash
# Builds the upstream programs the testbed runs, from pinned releases, through the Go module
# proxy, into a cache keyed by program and version ($ENI_IPAM_UPSTREAM_CACHE, default
# ~/.cache/eni-ipam/upstream/<program>-<version>/, shared by every checkout on the machine, never
# committed), and links each as .tools/<program>. A program already built at its pinned version
# is reused; the first build takes minutes per program on two cores.
#
#   kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy   Kubernetes $K8S
#   etcd                                                                  etcd $ETCD
#   coredns                                                               CoreDNS $COREDNS
#
# Usage: scripts/build-upstream.sh [program ...]   (all of them by default)
set -euo pipefail
cd "$(dirname "$0")/.."

K8S=1.33.13
ETCD=3.6.7
COREDNS=1.14.7
# The staging modules k8s.io/kubernetes replaces with folders of its own tree: a module that
# builds it from the proxy pins each to the release's matching v0.<minor>.<patch>.
STAGING="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms
kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller"

if ! command -v go >/dev/null; then
  echo "build-upstream: Go is not installed; install Go 1.24 or later (Debian: golang-go from bookworm-backports, or the polyglot machine) and run npm run tools again" >&2
  exit 1
fi

root=$(pwd)
tools=$root/.tools
store=${ENI_IPAM_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eni-ipam/upstream}
mkdir -p "$tools" "$store"
export GOFLAGS="${GOFLAGS:-} -mod=mod -buildvcs=false"
export CGO_ENABLED=0
export GOTOOLCHAIN=local

say() { printf 'build-upstream: %s\n' "$*" >&2; }

# build NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]: go build PACKAGE in MODULE_DIR into place.
build() {
  local name=$1 version=$2 dir=$3 pkg=$4 ldflags=${5:-}
  local out=$store/$name-$version
  if [ -x "$out/$name" ]; then
    ln -sfn "$out/$name" "$tools/$name"
    return
  fi
  say "building $name $version (minutes on a cold Go cache) ..."
  local start=$SECONDS
  # Never a half binary of an interrupted run: each build starts from an empty folder.
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp"
  # A dot every 30 s, so a long build shows it is alive.
  (while sleep 30; do printf '.' >&2; done) &
  ticker=$!
  trap 'kill $ticker 2>/dev/null' EXIT
  local rc=0
  (cd "$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp/$name" "$pkg") || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  [ "$rc" -eq 0 ] || { echo >&2; say "building $name $version failed (go build $pkg in $dir)"; exit 1; }
  rm -rf "$out" && mv "$out.tmp" "$out"
  ln -sfn "$out/$name" "$tools/$name"
  echo >&2
  say "built $name $version in $((SECONDS - start)) s"
}

# A module of our own per upstream release: go.mod pins the release, main.go (where the
# release's main package cannot be built from the proxy) calls the release's own main.
k8s_module() {
  local dir=$store/src/kubernetes-$K8S
  if [ ! -f "$dir/go.sum.done" ]; then
    mkdir -p "$dir"
    {
      echo "module eni-ipam.local/upstream/kubernetes"
      echo
      echo "go 1.24.0"
      echo
      echo "require k8s.io/kubernetes v$K8S"
      echo
      echo "replace ("
      for m in $STAGING; do echo "	k8s.io/$m => k8s.io/$m v0.${K8S#1.}"; done
      echo ")"
    } >"$dir/go.mod"
    echo 'package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"' >"$dir/tools.go"
    say "resolving Kubernetes $K8S's modules ..."
    (cd "$dir" && go mod tidy >/dev/null 2>&1 || go mod download) || { say "cannot resolve k8s.io/kubernetes v$K8S"; exit 1; }
    touch "$dir/go.sum.done"
  fi
  echo "$dir"
}

k8s_ldflags() {
  local v=k8s.io/component-base/version minor=${K8S#1.}
  minor=${minor%%.*}
  echo "-X $v.gitVersion=v$K8S -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
}

# wrapper_module NAME VERSION MODULE MAIN_GO: a module of ours requiring MODULE at VERSION whose
# main.go is MAIN_GO (the release's own main, whose root module cannot be built from the proxy).
wrapper_module() {
  local name=$1 version=$2 module=$3 main=$4
  local dir=$store/src/$name-$version
  if [ ! -f "$dir/go.sum.done" ]; then
    mkdir -p "$dir"
    printf 'module eni-ipam.local/upstream/%s\n\ngo 1.24.0\n\nrequire %s v%s\n' "$name" "$module" "$version" >"$dir/go.mod"
    printf '%b' "$main" >"$dir/main.go"
    say "resolving $name $version's modules ..."
    (cd "$dir" && go mod tidy >/dev/null) || { say "cannot resolve $module v$version"; exit 1; }
    touch "$dir/go.sum.done"
  fi
  echo "$dir"
}

# etcd's own main.go is this call.
ETCD_MAIN='package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n'
# CoreDNS's own coredns.go: the plugins compiled in are the release's (core/plugin).
COREDNS_MAIN='package main\n\nimport (\n\t_ "github.com/coredns/coredns/core/plugin"\n\t"github.com/coredns/coredns/coremain"\n)\n\nfunc main() { coremain.Run() }\n'

wanted=${*:-"etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy coredns"}
for p in $wanted; do
  case $p in
  etcd) build etcd "$ETCD" "$(wrapper_module etcd "$ETCD" go.etcd.io/etcd/server/v3 "$ETCD_MAIN")" . ;;
  coredns)
    dir=$(wrapper_module coredns "$COREDNS" github.com/coredns/coredns "$COREDNS_MAIN")
    build coredns "$COREDNS" "$dir" . "-X github.com/coredns/coredns/coremain.GitCommit=v$COREDNS"
    ;;
  kube-apiserver | kube-controller-manager | kube-scheduler | kube-proxy)
    build "$p" "$K8S" "$(k8s_module)" "k8s.io/kubernetes/cmd/$p" "$(k8s_ldflags)"
    ;;
  *) say "unknown program $p" && exit 2 ;;
  esac
done
