package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const changelogHead = "# Changelog\n\n" + marker + "\n\n"

// testComponents is the list of the tests' entries.
var testComponents = map[string]bool{"exporter/svc": true, "processor/svcmetadata": true, "pkg/masking": true, "x": true}

func writeEntry(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestUpdateRendersBreakingFirstAndReplacesUnreleased(t *testing.T) {
	dir := t.TempDir()
	writeEntry(t, dir, "a.yaml", "change_type: bug_fix\ncomponent: exporter/svc\nnote: a fix\nissues: [3]\n")
	writeEntry(t, dir, "b.yaml", "change_type: breaking\ncomponent: processor/svcmetadata\nnote: a breaking change\nissues: [1, 2]\nsubtext: |\n  Upgrade: do this.\n  Then that.\n")
	writeEntry(t, dir, templateYML, "change_type:\n") // never read
	entries, err := readEntries(dir, testComponents)
	if err != nil {
		t.Fatal(err)
	}
	old := changelogHead + "## Unreleased\n\n- stale\n\n## v0.1.0\n\n- released\n"
	got, err := update(old, unreleased, entries, true)
	if err != nil {
		t.Fatal(err)
	}
	want := changelogHead + "## Unreleased\n\n" +
		"### 🛑 Breaking changes 🛑\n\n- `processor/svcmetadata`: a breaking change (#1, #2)\n  Upgrade: do this.\n  Then that.\n\n" +
		"### 🧰 Bug fixes 🧰\n\n- `exporter/svc`: a fix (#3)\n\n" +
		"## v0.1.0\n\n- released\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Running it again gives the same file.
	again, err := update(got, unreleased, entries, false)
	if err != nil || again != got {
		t.Errorf("second update changed the changelog (err %v):\n%s", err, again)
	}
}

func TestUpdateReleaseReplacesUnreleasedAndRefusesADuplicate(t *testing.T) {
	entries := []Entry{{ChangeType: "enhancement", Component: "pkg/masking", Note: "faster", Issues: []int{9}}}
	old := changelogHead + "## Unreleased\n\n- pending\n\n## v0.1.0\n\n- released\n"
	got, err := update(old, "v0.2.0", entries, true)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "Unreleased") || !strings.Contains(got, "## v0.2.0\n\n### 💡 Enhancements 💡\n\n- `pkg/masking`: faster (#9)\n\n## v0.1.0") {
		t.Errorf("release section not in place of Unreleased:\n%s", got)
	}
	if _, err := update(got, "v0.2.0", entries, false); err == nil {
		t.Error("a second v0.2.0 section was accepted")
	}
	if _, err := update(old, "v0.3.0", nil, false); err == nil {
		t.Error("a release without entries was accepted")
	}
}

func TestUpdateRefusesToDropAHandWrittenEntry(t *testing.T) {
	entries := []Entry{{ChangeType: "bug_fix", Component: "exporter/svc", Note: "a fix", Issues: []int{3}}}
	old := changelogHead + "## Unreleased\n\n### 🧰 Bug fixes 🧰\n\n- `exporter/svc`: a fix (#3)\n- `svcscore`: written by hand (#7)\n\n## v0.1.0\n\n- released\n"
	_, err := update(old, unreleased, entries, false)
	if err == nil || !strings.Contains(err.Error(), "- `svcscore`: written by hand (#7)") {
		t.Fatalf("error %v does not name the hand-written entry", err)
	}
	got, err := update(old, unreleased, entries, true)
	if err != nil || strings.Contains(got, "written by hand") {
		t.Errorf("-force kept the hand-written entry or failed (%v):\n%s", err, got)
	}
}

func TestInvalidEntriesAreNamed(t *testing.T) {
	for name, body := range map[string]string{
		"type.yaml":      "change_type: feature\ncomponent: x\nnote: n\nissues: [1]\n",
		"note.yaml":      "change_type: bug_fix\ncomponent: x\nnote: \"two\\nlines\"\nissues: [1]\n",
		"issues.yaml":    "change_type: bug_fix\ncomponent: x\nnote: n\n",
		"unknown.yaml":   "change_type: bug_fix\ncomponent: x\nnote: n\nissues: [1]\nissue: 2\n",
		"empty.yaml":     "change_type: bug_fix\nnote: n\nissues: [1]\n",
		"component.yaml": "change_type: bug_fix\ncomponent: svcexporter\nnote: n\nissues: [1]\n",
		"long.yaml":      "change_type: bug_fix\ncomponent: x\nnote: " + strings.Repeat("é", maxNote+1) + "\nissues: [1]\n",
		"subtext.yaml":   "change_type: bug_fix\ncomponent: x\nnote: n\nissues: [1]\nsubtext: |\n  1\n  2\n  3\n  4\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeEntry(t, dir, name, body)
			_, err := readEntries(dir, testComponents)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("error %v does not name %s", err, name)
			}
		})
	}
}

func TestLimitsAcceptTheLongestAllowed(t *testing.T) {
	dir := t.TempDir()
	writeEntry(t, dir, "a.yaml", "change_type: bug_fix\ncomponent: x\nnote: "+strings.Repeat("é", maxNote)+
		"\nissues: [1]\nsubtext: |\n  1\n\n  2\n  3\n")
	if _, err := readEntries(dir, testComponents); err != nil {
		t.Error(err)
	}
}

func TestComponentsOfReadsMetadataAndPkg(t *testing.T) {
	root := t.TempDir()
	for path, body := range map[string]string{
		"svcexporter/metadata.yaml":      "type: svc\nstatus:\n  class: exporter\n",
		"svcauthextension/metadata.yaml": "type: svcauth\nstatus:\n  class: extension\n",
		"pkg/masking/masking.go":         "package masking\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeEntry(t, root, path, body)
	}
	got, err := componentsOf(root)
	if err != nil {
		t.Fatal(err)
	}
	want := "distribution, docs, exporter/svc, extension/svcauth, pkg/masking, testbed"
	if s := strings.Join(sortedKeys(got), ", "); s != want {
		t.Errorf("components %s, want %s", s, want)
	}
}

// check is what `make lint` runs: it fails when CHANGELOG.md is not the entries' rendering.
func TestCheckFailsOnAStaleChangelog(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, ".chloggen")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeEntry(t, dir, "a.yaml", "change_type: bug_fix\ncomponent: docs\nnote: a fix\nissues: [3]\n")
	changelog := filepath.Join(root, "CHANGELOG.md")
	writeEntry(t, root, "CHANGELOG.md", changelogHead)
	args := []string{"-dir", dir, "-changelog", changelog, "-root", root}
	if err := run(append([]string{"check"}, args...)); err == nil || !strings.Contains(err.Error(), "make changelog") {
		t.Fatalf("check of a changelog without the entry: %v", err)
	}
	if err := run(append([]string{"update"}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := run(append([]string{"check"}, args...)); err != nil {
		t.Errorf("check after update: %v", err)
	}
	writeEntry(t, dir, "b.yaml", "change_type: enhancement\ncomponent: docs\nnote: more\nissues: [4]\n")
	if err := run(append([]string{"check"}, args...)); err == nil {
		t.Error("check passed with an entry not rendered")
	}
}
