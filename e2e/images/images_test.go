package images

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestBuildWritesOneLayerWithTheBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "daemon")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	s := Spec{Tag: "example.test/daemon:v2", Binary: bin, Path: "/usr/bin/daemon", Cmd: []string{"--port=8080"}, User: "65532:65532", Env: []string{"VERSION=v2"}}
	if err := Build(s, out); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("example.test/daemon:v2")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/bin/daemon"}) || !slices.Equal(cfg.Config.Cmd, []string{"--port=8080"}) ||
		cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Env, []string{"VERSION=v2"}) || cfg.OS != "linux" {
		t.Errorf("config = %+v, want the spec's entrypoint, cmd, user, env on linux", cfg.Config)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "usr/bin/daemon" {
			b, _ := io.ReadAll(tr)
			if string(b) != "#!binary" || h.Mode != 0o755 || h.Uid != 0 {
				t.Errorf("binary = %q mode %o uid %d; want the file, 0755, root", b, h.Mode, h.Uid)
			}
		}
	}
	if !slices.Equal(names, []string{"usr/", "usr/bin/", "usr/bin/daemon"}) {
		t.Errorf("layer = %v, want the binary and its folders", names)
	}
}

func TestBuildIsReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(bin, []byte("pause"), 0o755); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		img, _, err := Image(Spec{Tag: "example.test/pause:1", Binary: bin, Path: "/pause"})
		if err != nil {
			t.Fatal(err)
		}
		id, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id.String())
	}
	if ids[0] != ids[1] {
		t.Errorf("image IDs %v differ for the same binary", ids)
	}
}

func TestBuildRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []Spec{
		{Tag: "Not A Tag", Binary: "/bin/true", Path: "/x"},
		{Tag: "example.test/x:1", Binary: "/bin/true", Path: "relative"},
		{Tag: "example.test/x:1", Binary: filepath.Join(dir, "missing"), Path: "/x"},
	} {
		if err := Build(s, filepath.Join(dir, "out.tar")); err == nil {
			t.Errorf("Build(%+v) = nil, want an error", s)
		}
	}
}
