//go:build tools

// Package tools names the command this module builds (scheduler-plugins'
// kube-scheduler, whose Coscheduling plugin is the gang-scheduling peer the
// live-replay benchmark compares against), so that `go mod tidy` keeps
// every module it needs. Nothing here is compiled on its own.
package tools

import (
	_ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
)
