//go:build tools

// Builds helm, for the tests that lint and render deploy/helm/gpu-scheduler.
// A module of its own: helm pins its own Kubernetes libraries, which need
// not match the control plane's in tools/k8s.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
