# shellcheck shell=bash
# Sourced by tools/k8s/build, cluster and matrix: which Kubernetes
# releases the control plane can be built at, and where each one's Go
# module is. The default release is pinned by tools/k8s/go.mod; each other
# one by tools/k8s/versions/vMAJOR.MINOR/go.mod (+ go.sum). K8S_VERSION
# names one exactly (e.g. v1.35.4); unset or empty means the default.

k8s_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# The k8s.io/kubernetes version a go.mod requires.
k8s_pinned() {
    awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v[0-9]/ { print $2; exit }' "$1"
}

k8s_default_version() {
    k8s_pinned "$k8s_dir/go.mod"
}

# Every supported release, oldest first, one a line.
k8s_versions() {
    {
        k8s_default_version
        local m
        for m in "$k8s_dir"/versions/*/go.mod; do
            [ -f "$m" ] && k8s_pinned "$m"
        done
    } | sort -u -V
}

# The module directory of release $1 (empty: the default); fails with the
# supported list when there is none.
k8s_module_dir() {
    local want="${1:-}"
    if [ -z "$want" ] || [ "$want" = "$(k8s_default_version)" ]; then
        echo "$k8s_dir"
        return 0
    fi
    local m
    for m in "$k8s_dir"/versions/*/go.mod; do
        if [ -f "$m" ] && [ "$(k8s_pinned "$m")" = "$want" ]; then
            dirname "$m"
            return 0
        fi
    done
    echo "error: K8S_VERSION=$want is not supported; supported: $(k8s_versions | paste -sd ' ') (unset: $(k8s_default_version))" >&2
    return 1
}
