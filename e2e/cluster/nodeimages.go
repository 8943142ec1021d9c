package cluster

// The real node's images, built here and imported into its containerd.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"everynode.io/e2e/images"
)

// BuildImages builds the real node's images as static binaries in image
// archives (package images) and imports them into containerd: pause, the
// test daemon tagged v1 and v2, and everynode tagged tag.
func (c *Cluster) BuildImages(ctx context.Context, tag string) error {
	start := time.Now()
	bins := c.nodePath("bin")
	static := func(dir, pkg, out string, ldflags string) error {
		// The flags of `make build` (CGO off, no -trimpath), so the two
		// share the build cache; -ldflags only changes the link.
		argv := []string{"go", "-C", dir, "build", "-ldflags", "-s -w " + ldflags, "-o", filepath.Join(bins, out), pkg}
		cmd := c.command(ctx, argv)
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, b)
		}
		return nil
	}
	e2e := filepath.Join(c.Root, "e2e")
	if err := static(e2e, "./cmd/pause", "pause", ""); err != nil {
		return err
	}
	if err := static(e2e, "./cmd/testdaemon", "testdaemon", ""); err != nil {
		return err
	}
	if err := static(c.Root, "./cmd/everynode", "everynode", "-X main.version="+tag); err != nil {
		return err
	}
	specs := []images.Spec{
		{Tag: PauseImage, Binary: filepath.Join(bins, "pause"), Path: "/pause", User: "65535:65535"},
		{Tag: TestDaemonImage + ":v1", Binary: filepath.Join(bins, "testdaemon"), Path: "/testdaemon", User: "65532:65532", Env: []string{"VERSION=v1"}},
		{Tag: TestDaemonImage + ":v2", Binary: filepath.Join(bins, "testdaemon"), Path: "/testdaemon", User: "65532:65532", Env: []string{"VERSION=v2"}},
		images.Everynode(filepath.Join(bins, "everynode"), EverynodeImage+":"+tag),
		{Tag: CoreDNSImage, Binary: c.Tool("coredns"), Path: "/coredns", User: "65532:65532"},
		{Tag: SchedulerImage, Binary: c.Tool("kube-scheduler-static"), Path: "/usr/local/bin/kube-scheduler", User: "65532:65532"},
	}
	for _, s := range specs {
		if err := c.ImportImage(ctx, s); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.Log, "built and imported %d images in %s\n", len(specs), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// ImportImage builds the image of s and imports it into the real node's
// containerd.
func (c *Cluster) ImportImage(ctx context.Context, s images.Spec) error {
	name := strings.NewReplacer("/", "_", ":", "_").Replace(s.Tag) + ".tar"
	archive := c.nodePath("images", name)
	if err := images.Build(s, archive); err != nil {
		return err
	}
	return c.run(ctx, true, c.Tool("ctr"), "--address", c.containerdSocket(), "--namespace", realNodeRuntimeNS,
		"images", "import", "--no-unpack=false", archive)
}
