//go:build tools

// Package tools pins kruise-manager, the main package at the root of
// github.com/openkruise/kruise, which e2e/hack/tools.sh (`tools.sh kruise`)
// builds into .e2e/bin. The build tag keeps this file out of every build;
// the blank import only makes `go mod tidy` keep the module and its go.sum
// lines.
package tools

import _ "github.com/openkruise/kruise"
