// Package readmebuild checks the README's promise to users who build their own collector: the ocb
// manifest lists of "Adding the components to your own collector build", copied as they are, give
// a collector that loads the shipped distribution/config.yaml.
//
// TestSnippetManifest (every `go test`) checks how the snippet becomes a manifest; TestREADMEBuild
// builds it with ocb and runs `validate` on the shipped config, when SVC_OCB names the ocb binary
// (`make readme-build-test`, part of `make test`). The snippet names our modules by their
// published path and version; the build takes each from this checkout (a `path:` per module and a
// replace for pkg, as builder-config.yaml does), so it tests the code beside the README.
package readmebuild

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const (
	// heading of the README section whose first yaml block is the snippet.
	heading = "## Adding the components to your own collector build"
	// ourModules is the prefix of this repository's modules; each is the directory of its suffix.
	ourModules = "github.com/svc/svc-collector/"
)

// manifestKinds are the sections of an ocb manifest the snippet may have.
var manifestKinds = []string{"receivers", "processors", "exporters", "connectors", "extensions", "providers"}

// snippet is the first ```yaml block after the heading.
func snippet(readme string) (string, error) {
	at := strings.Index(readme, "\n"+heading+"\n")
	if at < 0 {
		return "", fmt.Errorf("README.md has no section %q", heading)
	}
	section := readme[at+len(heading)+2:]
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	start := strings.Index(section, "```yaml\n")
	if start < 0 {
		return "", fmt.Errorf("section %q has no ```yaml block", heading)
	}
	body := section[start+len("```yaml\n"):]
	end := strings.Index(body, "```")
	if end < 0 {
		return "", fmt.Errorf("section %q: the yaml block is not closed", heading)
	}
	return body[:end], nil
}

// manifest is the ocb manifest of the snippet built from the checkout at repo into out: a dist
// section, the snippet's lists with a `path:` for each of our modules, and the replace of pkg.
func manifest(snip, repo, out string) ([]byte, error) {
	var top map[string]any
	if err := yaml.Unmarshal([]byte(snip), &top); err != nil {
		return nil, fmt.Errorf("the README's snippet is not YAML: %w", err)
	}
	for kind := range top {
		if !isKind(kind) {
			return nil, fmt.Errorf("the README's snippet has %q, not a component list of an ocb manifest", kind)
		}
	}
	var lists map[string][]map[string]any
	if err := yaml.Unmarshal([]byte(snip), &lists); err != nil {
		return nil, fmt.Errorf("the README's snippet: %w", err)
	}
	m := map[string]any{
		"dist": map[string]any{
			"module":      "github.com/svc/svc-collector/readme-otelcol",
			"name":        "readme-otelcol",
			"description": "the README's ocb snippet, built from this checkout",
			"version":     "0.0.0",
			"output_path": out,
		},
		"replaces": []string{ourModules + "pkg => " + filepath.Join(repo, "pkg")},
	}
	for kind, entries := range lists {
		for _, e := range entries {
			gomod, _ := e["gomod"].(string)
			module, version, ok := strings.Cut(gomod, " ")
			if !ok || version == "" {
				return nil, fmt.Errorf("%s: entry %v has no `gomod: <module> <version>`", kind, e)
			}
			if _, ok := e["path"]; ok {
				return nil, fmt.Errorf("%s: %s has a path: the README shows what a user writes", kind, module)
			}
			dir, ours := strings.CutPrefix(module, ourModules)
			if !ours {
				continue
			}
			gomodFile, err := os.ReadFile(filepath.Join(repo, dir, "go.mod"))
			if err != nil || !bytes.HasPrefix(gomodFile, []byte("module "+module+"\n")) {
				return nil, fmt.Errorf("%s: %s is not a module of this repository (no %s/go.mod naming it)", kind, module, dir)
			}
			e["path"] = filepath.Join(repo, dir)
		}
	}
	for kind, entries := range lists {
		m[kind] = entries
	}
	return yaml.Marshal(m)
}

func isKind(kind string) bool {
	for _, k := range manifestKinds {
		if k == kind {
			return true
		}
	}
	return false
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestSnippetManifest(t *testing.T) {
	repo := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	snip, err := snippet(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := manifest(snip, repo, "/tmp/out")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	ours := 0
	for _, kind := range manifestKinds {
		entries, _ := m[kind].([]any)
		for _, e := range entries {
			if p, ok := e.(map[string]any)["path"].(string); ok {
				ours++
				if _, err := os.Stat(filepath.Join(p, "metadata.yaml")); err != nil {
					t.Errorf("%s: %v", kind, err)
				}
			}
		}
	}
	if ours == 0 {
		t.Error("the snippet names none of our modules")
	}

	bad := []struct{ name, readme, err string }{
		{"no section", "# x\n", "no section"},
		{"no block", "\n" + heading + "\n\ntext\n\n## Next\n```yaml\nx: 1\n```\n", "no ```yaml block"},
		{"not a manifest list", "\n" + heading + "\n```yaml\nservice: {}\n```\n", `"service"`},
		{"no version", "\n" + heading + "\n```yaml\nexporters:\n  - gomod: " + ourModules + "svcexporter\n```\n", "no `gomod"},
		{"not ours", "\n" + heading + "\n```yaml\nexporters:\n  - gomod: " + ourModules + "nothere v0.1.0\n```\n", "not a module of this repository"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			s, err := snippet(tt.readme)
			if err == nil {
				_, err = manifest(s, repo, "/tmp/out")
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want one containing %s", err, tt.err)
			}
		})
	}
}

// TestREADMEBuild builds the snippet with ocb and loads distribution/config.yaml with the binary.
func TestREADMEBuild(t *testing.T) {
	ocb := os.Getenv("SVC_OCB")
	if ocb == "" {
		t.Skip("SVC_OCB (the ocb binary) is not set: run `make readme-build-test`")
	}
	repo := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	snip, err := snippet(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(repo, "build", "readme-otelcol")
	raw, err := manifest(snip, repo, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(out, "manifest.yaml")
	if err := os.WriteFile(config, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(ocb, "--config", config)
	build.Env = append(os.Environ(), "GOWORK=off")
	if log, err := build.CombinedOutput(); err != nil {
		t.Fatalf("ocb could not build the README's snippet (manifest %s): %v\n%s", config, err, tail(log))
	}
	validate := exec.Command(filepath.Join(out, "readme-otelcol"), "validate", "--config", filepath.Join(repo, "distribution", "config.yaml"))
	// The variables distribution/config.yaml requires; validate loads the config, it connects nowhere.
	validate.Env = append(os.Environ(), "SVC_ENDPOINT=https://svc.example.com", "SVC_PUBLIC_KEY=pk-readme", "SVC_SECRET_KEY=sk-readme")
	log, err := validate.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("a collector built from the README's snippet refuses distribution/config.yaml:\n%s", log)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s from the README's snippet; it loads distribution/config.yaml", filepath.Join(out, "readme-otelcol"))
}

// tail is the end of a long build log.
func tail(log []byte) []byte {
	if len(log) > 8000 {
		return log[len(log)-8000:]
	}
	return log
}
