package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const changelogHead = "# Changelog\n\n" + marker + "\n\n"

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
	entries, err := readEntries(dir)
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
		"type.yaml":    "change_type: feature\ncomponent: x\nnote: n\nissues: [1]\n",
		"note.yaml":    "change_type: bug_fix\ncomponent: x\nnote: \"two\\nlines\"\nissues: [1]\n",
		"issues.yaml":  "change_type: bug_fix\ncomponent: x\nnote: n\n",
		"unknown.yaml": "change_type: bug_fix\ncomponent: x\nnote: n\nissues: [1]\nissue: 2\n",
		"empty.yaml":   "change_type: bug_fix\nnote: n\nissues: [1]\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeEntry(t, dir, name, body)
			_, err := readEntries(dir)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("error %v does not name %s", err, name)
			}
		})
	}
}
