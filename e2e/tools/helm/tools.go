//go:build tools

// Package tools pins the helm command that e2e/hack/tools.sh builds into
// .e2e/bin; the build tag keeps it out of builds, `go mod tidy` keeps the deps.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
