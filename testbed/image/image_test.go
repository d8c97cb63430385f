// Package image tests the container image of `make image` (build/svc-otelcol-image.tar, an OCI
// archive) without a container runtime: it unpacks the image's layers into a directory, checks the
// image config a runtime would apply, and runs the binary from the unpacked filesystem with the
// image's own default config against the local platform until its health check answers.
package image

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
)

// imageArchive is the oci-archive under test; the test is skipped when none was built.
func imageArchive(t *testing.T) string {
	t.Helper()
	p := os.Getenv("SVC_IMAGE_ARCHIVE")
	if p == "" {
		t.Skip("SVC_IMAGE_ARCHIVE is not set: no image to test (run `make image-test`)")
	}
	return p
}

// ociImage is an unpacked image: its config and its root filesystem.
type ociImage struct {
	Config struct {
		User         string              `json:"User"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		Env          []string            `json:"Env"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Volumes      map[string]struct{} `json:"Volumes"`
	} `json:"config"`
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	rootfs       string
	layers       int
	// owners are the uid of each path as the layers give it.
	owners map[string]int
}

func TestImage(t *testing.T) {
	img, err := unpack(imageArchive(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image: %s/%s, %d layer(s), user %q, entrypoint %q, cmd %q", img.OS, img.Architecture, img.layers, img.User(), img.Config.Entrypoint, img.Config.Cmd)

	t.Run("config", func(t *testing.T) {
		if img.Config.User != "10001:10001" {
			t.Errorf("user %q, want the non-root 10001:10001", img.Config.User)
		}
		if want := []string{"/svc-otelcol"}; !slices.Equal(img.Config.Entrypoint, want) {
			t.Errorf("entrypoint %q, want %q", img.Config.Entrypoint, want)
		}
		if want := []string{"--config", "/etc/svc-otelcol/config.yaml"}; !slices.Equal(img.Config.Cmd, want) {
			t.Errorf("cmd %q, want %q", img.Config.Cmd, want)
		}
		for _, port := range []string{"4317/tcp", "4318/tcp", "13133/tcp", "8888/tcp"} {
			if _, ok := img.Config.ExposedPorts[port]; !ok {
				t.Errorf("port %s not exposed (exposed: %v)", port, img.Config.ExposedPorts)
			}
		}
		if !slices.Contains(img.Config.Env, "SVC_STORAGE_DIR=/var/lib/svc-otelcol") {
			t.Errorf("env %q does not point SVC_STORAGE_DIR at the volume", img.Config.Env)
		}
		if _, ok := img.Config.Volumes["/var/lib/svc-otelcol"]; !ok {
			t.Errorf("volumes %v: no /var/lib/svc-otelcol", img.Config.Volumes)
		}
	})

	t.Run("filesystem", func(t *testing.T) {
		// The user exists by number in /etc/passwd (so that tools and the Go runtime can name it).
		passwd, err := os.ReadFile(filepath.Join(img.rootfs, "etc", "passwd"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(passwd), "\nsvc-otelcol:x:10001:10001:") {
			t.Errorf("/etc/passwd has no svc-otelcol user 10001:\n%s", passwd)
		}
		// The CA bundle parses and holds real roots: TLS to the platform works from the image.
		pem, err := os.ReadFile(filepath.Join(img.rootfs, "etc", "ssl", "certs", "ca-certificates.crt"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			t.Error("/etc/ssl/certs/ca-certificates.crt holds no certificate")
		}
		// Static: a FROM scratch image has no dynamic loader.
		f, err := elf.Open(filepath.Join(img.rootfs, "svc-otelcol"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("/svc-otelcol is dynamically linked (it has an ELF interpreter); build it with CGO_ENABLED=0")
			}
		}
		for _, cfg := range []string{"config.yaml", "router.yaml", "gateway.yaml"} {
			if _, err := os.Stat(filepath.Join(img.rootfs, "etc", "svc-otelcol", cfg)); err != nil {
				t.Error(err)
			}
		}
		// The storage volume and /tmp belong to the collector's user.
		for _, dir := range []string{"var/lib/svc-otelcol", "tmp"} {
			if uid, ok := img.owners[dir]; !ok || uid != 10001 {
				t.Errorf("/%s: owner %d (in the image: %v), want 10001", dir, uid, ok)
			}
		}
	})

	t.Run("runs healthy with its default config", func(t *testing.T) {
		p, err := platform.Start(platform.Options{PublicKey: "pk-image", SecretKey: "sk-image"})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		// The entrypoint and cmd of the image, with the image's paths mapped into the unpacked
		// filesystem. (The storage directory is the harness's: it runs as this user, not 10001.)
		args := slices.Clone(img.Config.Cmd)
		for i, a := range args {
			if strings.HasPrefix(a, "/") {
				args[i] = filepath.Join(img.rootfs, a)
			}
		}
		if len(args) != 2 || args[0] != "--config" {
			t.Fatalf("cmd %q: want --config FILE", img.Config.Cmd)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		c, err := collector.Start(ctx, collector.Options{
			Binary:  filepath.Join(img.rootfs, img.Config.Entrypoint[0]),
			Configs: []string{args[1]},
			Env:     []string{"SVC_ENDPOINT=" + p.URL(), "SVC_PUBLIC_KEY=pk-image", "SVC_SECRET_KEY=sk-image"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v\n%s", err, c.Logs())
		}
	})

	t.Run("router config loads", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := collector.Run(ctx, filepath.Join(img.rootfs, "svc-otelcol"),
			[]string{"SVC_GATEWAYS=[127.0.0.1:4317, 127.0.0.2:4317]"},
			"validate", "--config", filepath.Join(img.rootfs, "etc", "svc-otelcol", "router.yaml"))
		if err != nil {
			t.Errorf("validate router.yaml: %v\n%s", err, out)
		}
	})
}

func (img *ociImage) User() string { return img.Config.User }

// unpack reads an OCI archive (index.json → manifest → config and layers) and applies its layers
// in order to dir/rootfs.
func unpack(archive, dir string) (*ociImage, error) {
	blobs := filepath.Join(dir, "archive")
	if err := untar(archive, blobs, nil, false); err != nil {
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	var index struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	if err := readJSON(filepath.Join(blobs, "index.json"), &index); err != nil {
		return nil, err
	}
	if len(index.Manifests) != 1 {
		return nil, fmt.Errorf("index.json lists %d manifests, want 1", len(index.Manifests))
	}
	var manifest struct {
		Config struct {
			Digest string `json:"digest"`
		} `json:"config"`
		Layers []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"layers"`
	}
	if err := readJSON(blob(blobs, index.Manifests[0].Digest), &manifest); err != nil {
		return nil, err
	}
	img := &ociImage{rootfs: filepath.Join(dir, "rootfs"), layers: len(manifest.Layers), owners: map[string]int{}}
	if err := readJSON(blob(blobs, manifest.Config.Digest), img); err != nil {
		return nil, err
	}
	for _, l := range manifest.Layers {
		gz := strings.HasSuffix(l.MediaType, "+gzip")
		if !gz && !strings.HasSuffix(l.MediaType, ".tar") {
			return nil, fmt.Errorf("layer %s: media type %s not supported", l.Digest, l.MediaType)
		}
		if err := untar(blob(blobs, l.Digest), img.rootfs, img.owners, gz); err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	return img, nil
}

func blob(dir, digest string) string {
	algo, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(dir, "blobs", algo, hex)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// untar extracts a tar (gzip-compressed when gz) into dir: directories, regular files and
// symlinks, with their modes; the owner of each entry is recorded in owners (by path without the
// leading slash) instead of applied, since the test does not run as root.
func untar(path, dir string, owners map[string]int, gz bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if gz {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." || strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		if owners != nil {
			owners[strings.TrimSuffix(name, "/")] = h.Uid
		}
		target := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			out, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, os.FileMode(h.Mode).Perm()|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			_ = os.Remove(target)
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		}
	}
}
