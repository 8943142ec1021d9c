//go:build tools

// Package tools pins the promtool command that e2e/hack/tools.sh builds into
// .e2e/bin for `make rules-check`; the build tag keeps it out of builds,
// `go mod tidy` keeps the deps.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
