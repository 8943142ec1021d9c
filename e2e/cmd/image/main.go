// Command image writes everynode's container image as an archive without
// Docker, for `make image`: the static binary of `make build` on an empty
// base (package everynode.io/e2e/images). Load it with `docker load -i`,
// `podman load -i` or `ctr -n k8s.io images import`.
//
// Usage: image --binary bin/everynode --tag ghcr.io/everynode/everynode:v1 --out bin/everynode-image.tar
package main

import (
	"debug/elf"
	"flag"
	"fmt"
	"os"

	"everynode.io/e2e/images"
)

func main() {
	binary := flag.String("binary", "bin/everynode", "everynode's binary, built with CGO_ENABLED=0")
	tag := flag.String("tag", "", "the image's reference, e.g. ghcr.io/everynode/everynode:v1")
	out := flag.String("out", "bin/everynode-image.tar", "the archive to write")
	flag.Parse()
	if err := run(*binary, *tag, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(binary, tag, out string) error {
	if tag == "" {
		return fmt.Errorf("--tag is required")
	}
	// The base is empty: a binary that needs a dynamic loader would fail
	// at start with a bare "no such file or directory".
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("%s: %w", binary, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0 (make build does)", binary)
		}
	}
	if err := images.Build(images.Everynode(binary, tag), out); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s)\n", out, tag)
	return nil
}
