// Package images builds container images without Docker: one static binary
// in one layer on an empty base, written as an image archive (the format of
// `docker save`, which `ctr images import`, `docker load` and `podman load`
// read). `make image` builds everynode's this way, and the real node of the
// harness (e2e/cluster) gets every image it runs from here: nothing is
// pulled from a registry.
//
// The archives are reproducible: file times and the image's creation time
// are the zero time, so the same binary gives the same image ID.
package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Spec is one image: a binary at Path, run as Entrypoint with Cmd.
type Spec struct {
	// Tag is the image's full reference, e.g. ghcr.io/everynode/everynode:v1.
	Tag string
	// Binary is the file on this machine to put in the image; it must be
	// static (CGO_ENABLED=0): the base is empty, there is no libc.
	Binary string
	// Path is where the binary lands in the image, e.g. /everynode.
	Path string
	// Entrypoint and Cmd as in a Dockerfile; Entrypoint defaults to Path.
	Entrypoint, Cmd []string
	// User is "uid:gid" ("" runs as root).
	User string
	// Env is KEY=value pairs.
	Env []string
}

// Everynode is everynode's image as the Dockerfile makes it, from a
// static binary: /everynode, run as the distroless nonroot user (65532,
// which the chart's securityContext names), `serve` by default.
func Everynode(binary, tag string) Spec {
	return Spec{Tag: tag, Binary: binary, Path: "/everynode", Cmd: []string{"serve"}, User: "65532:65532"}
}

// Build writes the image of s to the archive out.
func Build(s Spec, out string) error {
	img, ref, err := Image(s)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(out+".tmp", ref, img); err != nil {
		return fmt.Errorf("image %s: %w", s.Tag, err)
	}
	return os.Rename(out+".tmp", out)
}

// Image is the image of s and its reference, not yet written.
func Image(s Spec) (v1.Image, name.Tag, error) {
	ref, err := name.NewTag(s.Tag, name.WeakValidation)
	if err != nil {
		return nil, name.Tag{}, fmt.Errorf("image tag %q: %w", s.Tag, err)
	}
	if !path.IsAbs(s.Path) {
		return nil, name.Tag{}, fmt.Errorf("image %s: path %q in the image must be absolute", s.Tag, s.Path)
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, name.Tag{}, fmt.Errorf("image %s: %w", s.Tag, err)
	}
	layerTar, err := layerOf(s.Path, bin)
	if err != nil {
		return nil, name.Tag{}, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, name.Tag{}, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, name.Tag{}, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, name.Tag{}, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint = s.Entrypoint
	if len(cfg.Config.Entrypoint) == 0 {
		cfg.Config.Entrypoint = []string{s.Path}
	}
	cfg.Config.Cmd = s.Cmd
	cfg.Config.User = s.User
	cfg.Config.Env = s.Env
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, name.Tag{}, err
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: time.Time{}})
	return img, ref, err
}

// layerOf is a tar of the binary at p, with its parent folders, owned by
// root and executable by everyone (the image may run as any uid).
func layerOf(p string, bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var dirs []string
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p[1:], Mode: 0o755, Size: int64(len(bin)), Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
