//go:build tools

// Package tools names the command this module builds (KWOK, which gives
// the test control plane's nodes and pods a lifecycle), so that `go mod
// tidy` keeps every module it needs. Nothing here is compiled on its own.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
