#!/usr/bin/env bash
# Generates the kustomize base (deploy/kustomize/base) from the Helm chart (deploy/helm/hami-cpp)
# with the real `helm template`, so that the chart is the only hand-written copy of the objects:
#
#   bash scripts/gen_kustomize_base.sh                  rewrite deploy/kustomize/base
#   bash scripts/gen_kustomize_base.sh --out DIR        write the base into DIR instead
#   bash scripts/gen_kustomize_base.sh --namespace NS --out DIR
#                                                       a base for another namespace
#   ... --helm PATH                                     that helm (default: the pinned one)
#
# The base is the chart's defaults for a release called `hami` in `kube-system` (object names as
# HAMi's chart makes them, so an upgrade from HAMi replaces objects in place) on a Kubernetes
# v1.32.0 cluster (kube-scheduler's image follows the cluster's release; the base has to name
# one). Each template's objects go to a file of the template's name, every file starts with a
# comment saying it is generated and by which command, and kustomization.yaml lists them in the
# order helm renders them. After a chart change, run this and commit the result: the CTest
# `deploy_helm_matches_kustomize` fails while the checked-in base differs from what it writes.
# The overlays (deploy/kustomize/overlays) stay hand-written; the same test checks each against
# the chart with the values it mirrors.
#
# helm: --helm, else $HELM, else the pinned one of scripts/kube-tools.sh (built from Go modules,
# see tools/kube/README.md); the pin matters, since helm versions differ in how they print YAML.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
chart_rel=deploy/helm/hami-cpp
release=hami
namespace=kube-system
kube_version=v1.32.0
out=$root/deploy/kustomize/base
helm=${HELM:-}
while (($#)); do
  case "$1" in
    --out) out=${2:?--out needs a folder}; shift ;;
    --out=*) out=${1#--out=} ;;
    --namespace) namespace=${2:?--namespace needs a name}; shift ;;
    --namespace=*) namespace=${1#--namespace=} ;;
    --helm) helm=${2:?--helm needs a path}; shift ;;
    --helm=*) helm=${1#--helm=} ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "gen_kustomize_base: unknown argument '$1' (--out DIR, --namespace NS, --helm PATH)" >&2
       exit 2 ;;
  esac
  shift
done
if [[ -z $helm ]]; then
  if ! bin=$(bash "$root/scripts/kube-tools.sh" --print); then
    echo "gen_kustomize_base: the pinned helm is not built yet:" \
         "run \`bash scripts/kube-tools.sh\` (or pass --helm PATH)" >&2
    exit 1
  fi
  helm=$bin/helm
fi
[[ -x $helm ]] || { echo "gen_kustomize_base: $helm is not an executable helm" >&2; exit 1; }

command="bash scripts/gen_kustomize_base.sh"
if [[ $namespace != kube-system ]]; then command+=" --namespace $namespace"; fi
render="helm template $release $chart_rel --namespace $namespace --kube-version $kube_version"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# helm keeps state under these; none of the user's own.
HELM_CACHE_HOME=$tmp/cache HELM_CONFIG_HOME=$tmp/config HELM_DATA_HOME=$tmp/data \
  "$helm" template "$release" "$root/$chart_rel" --namespace "$namespace" \
  --kube-version "$kube_version" >"$tmp/rendered.yaml"

# Split the rendering at helm's `# Source: <chart>/templates/<file>` lines into one file per
# template (a template's documents stay together, separated by `---`), in rendering order, and
# drop the blanks templates leave at line ends (the deploy test checks that the objects are still
# the chart's).
mkdir "$tmp/base"
awk -v dir="$tmp/base" -v order="$tmp/order" '
  /^---$/ { next }
  /^# Source: / {
    file = $3; sub(/.*\//, "", file)
    if (!(file in seen)) { seen[file] = 1; print file >> order }
    else { print "---" >> (dir "/" file ".body") }
    next
  }
  file != "" { sub(/[ \t]+$/, ""); print >> (dir "/" file ".body") }
' "$tmp/rendered.yaml"
[[ -s $tmp/order ]] || { echo "gen_kustomize_base: helm rendered nothing" >&2; exit 1; }

header() {
  echo "# Generated from the Helm chart $chart_rel by"
  echo "#   $command"
  echo "# which runs \`${render% --kube-version*}"
  echo "# --kube-version $kube_version\`. Do not edit: change the chart and run the command again."
}
while read -r file; do
  { header; cat "$tmp/base/$file.body"; } >"$tmp/base/$file"
  rm "$tmp/base/$file.body"
done <"$tmp/order"
{
  header
  echo "#"
  echo "# hami-cpp for \`kubectl apply -k\` (or the base of an overlay, deploy/kustomize/overlays):"
  echo "# every object in $namespace, named as HAMi's chart names them for a release called"
  echo "# \"$release\". Name your image in an overlay (images: [{name: hami-cpp, newName: ...,"
  echo "# newTag: ...}]) or with \`kustomize edit set image hami-cpp=<registry>/hami-cpp:<tag>\`."
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  sed 's/^/- /' "$tmp/order"
} >"$tmp/base/kustomization.yaml"

# Replace what this script wrote before (so that the files of templates that no longer render
# go); other files are left alone, and the deploy test reports them as not generated.
mkdir -p "$out"
for f in "$out"/*.yaml; do
  [[ -e $f ]] || continue
  if head -n1 "$f" | grep -q '^# Generated from the Helm chart '; then rm "$f"; fi
done
cp "$tmp/base"/*.yaml "$out"/
echo "gen_kustomize_base: wrote $(wc -l <"$tmp/order") templates' objects and kustomization.yaml" \
     "into $out" >&2
