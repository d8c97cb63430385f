// Command chlog keeps CHANGELOG.md the way the collector and contrib keep theirs (chloggen): one
// YAML file per change under .chloggen/, rendered into CHANGELOG.md under a release heading.
//
//	go run ./tools/chlog validate          # every entry is well formed (part of `make lint`)
//	go run ./tools/chlog update            # render the entries as the "## Unreleased" section
//	go run ./tools/chlog update -version v0.2.0  # release: render them as "## v0.2.0", delete the files
//
// `update` without a version rewrites the Unreleased section from the entry files each time (the
// files stay, so it can be run again after a merge); with a version it replaces the Unreleased
// section by the release's and removes the entries it rendered.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// changeTypes in the order CHANGELOG.md lists them: breaking changes first.
var changeTypes = []struct{ key, heading string }{
	{"breaking", "### 🛑 Breaking changes 🛑"},
	{"deprecation", "### 🚩 Deprecations 🚩"},
	{"new_component", "### 🚀 New components 🚀"},
	{"enhancement", "### 💡 Enhancements 💡"},
	{"bug_fix", "### 🧰 Bug fixes 🧰"},
}

const (
	// marker is the line of CHANGELOG.md below which release sections are inserted.
	marker      = "<!-- next version -->"
	unreleased  = "Unreleased"
	templateYML = "TEMPLATE.yaml"
)

// Entry is one .chloggen file.
type Entry struct {
	ChangeType string `yaml:"change_type"`
	Component  string `yaml:"component"`
	Note       string `yaml:"note"`
	Issues     []int  `yaml:"issues"`
	Subtext    string `yaml:"subtext"`

	file string
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "chlog:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: chlog validate|update [-dir .chloggen] [-changelog CHANGELOG.md] [-version vX.Y.Z]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dir := fs.String("dir", ".chloggen", "directory of the entry files")
	changelog := fs.String("changelog", "CHANGELOG.md", "the changelog to update")
	version := fs.String("version", "", "release heading (e.g. v0.2.0); empty: the Unreleased section")
	force := fs.Bool("force", false, "replace the Unreleased section even if it has entries no .chloggen file renders")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	entries, err := readEntries(*dir)
	if err != nil {
		return err
	}
	switch args[0] {
	case "validate":
		fmt.Printf("chlog: %d entries in %s are valid\n", len(entries), *dir)
		return nil
	case "update":
		old, err := os.ReadFile(*changelog)
		if err != nil {
			return err
		}
		title := unreleased
		if *version != "" {
			title = *version
		}
		updated, err := update(string(old), title, entries, *force)
		if err != nil {
			return err
		}
		if err := os.WriteFile(*changelog, []byte(updated), 0o644); err != nil {
			return err
		}
		if *version != "" {
			for _, e := range entries {
				if err := os.Remove(e.file); err != nil {
					return err
				}
			}
		}
		fmt.Printf("chlog: %d entries rendered under %q in %s\n", len(entries), title, *changelog)
		return nil
	}
	return fmt.Errorf("unknown command %q (validate, update)", args[0])
}

// readEntries reads and validates every *.yaml file of dir but the template, in name order.
func readEntries(dir string) ([]Entry, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var entries []Entry
	var errs []error
	for _, name := range names {
		if filepath.Base(name) == templateYML {
			continue
		}
		e, err := readEntry(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries = append(entries, e)
	}
	return entries, errors.Join(errs...)
}

func readEntry(name string) (Entry, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&e); err != nil {
		return Entry{}, fmt.Errorf("%s: %w", name, err)
	}
	e.file = name
	return e, e.validate()
}

func (e Entry) validate() error {
	var problems []string
	if heading(e.ChangeType) == "" {
		problems = append(problems, fmt.Sprintf("change_type %q is not one of breaking, deprecation, new_component, enhancement, bug_fix", e.ChangeType))
	}
	if strings.TrimSpace(e.Component) == "" {
		problems = append(problems, "component is empty")
	}
	switch note := strings.TrimSpace(e.Note); {
	case note == "":
		problems = append(problems, "note is empty")
	case strings.Contains(note, "\n"):
		problems = append(problems, "note must be one line (details go in subtext)")
	}
	if len(e.Issues) == 0 {
		problems = append(problems, "issues is empty (name the issue the change closes)")
	}
	for _, n := range e.Issues {
		if n <= 0 {
			problems = append(problems, fmt.Sprintf("issue %d is not an issue number", n))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %s", e.file, strings.Join(problems, "; "))
	}
	return nil
}

func heading(changeType string) string {
	for _, t := range changeTypes {
		if t.key == changeType {
			return t.heading
		}
	}
	return ""
}

// render writes the section of one release: the change types in order, each entry as
// "- `component`: note (#N)" with its subtext indented below, sorted by component (stable: entries
// of one component keep their file order).
func render(title string, entries []Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n", title)
	for _, t := range changeTypes {
		var of []Entry
		for _, e := range entries {
			if e.ChangeType == t.key {
				of = append(of, e)
			}
		}
		if len(of) == 0 {
			continue
		}
		sort.SliceStable(of, func(i, j int) bool { return of[i].Component < of[j].Component })
		fmt.Fprintf(&b, "\n%s\n\n", t.heading)
		for _, e := range of {
			issues := make([]string, len(e.Issues))
			for i, n := range e.Issues {
				issues[i] = fmt.Sprintf("#%d", n)
			}
			fmt.Fprintf(&b, "- `%s`: %s (%s)\n", strings.TrimSpace(e.Component), strings.TrimSpace(e.Note), strings.Join(issues, ", "))
			for _, line := range strings.Split(strings.TrimSpace(e.Subtext), "\n") {
				if line = strings.TrimRight(line, " \t"); line != "" {
					fmt.Fprintf(&b, "  %s\n", line)
				}
			}
		}
	}
	return b.String()
}

// update puts the section of title below the marker, in place of the Unreleased section when
// there is one. With no entries, the Unreleased section is removed.
func update(changelog, title string, entries []Entry, force bool) (string, error) {
	at := strings.Index(changelog, marker)
	if at < 0 {
		return "", fmt.Errorf("the changelog has no %q line to insert below", marker)
	}
	head, rest := changelog[:at+len(marker)], strings.TrimLeft(changelog[at+len(marker):], "\n")
	if strings.HasPrefix(rest, "## "+unreleased+"\n") {
		section := rest
		next := strings.Index(rest[1:], "\n## ")
		if next < 0 {
			rest = ""
		} else {
			section, rest = rest[:next+1], rest[next+2:]
		}
		if lost := notRendered(section, render(title, entries)); len(lost) > 0 && !force {
			return "", fmt.Errorf("the Unreleased section has entries that no .chloggen file renders (written by hand, or from a branch merged without its entry files); add them as .chloggen entries, or run with -force to drop them:\n%s", strings.Join(lost, "\n"))
		}
	}
	if title != unreleased && (strings.HasPrefix(rest, "## "+title+"\n") || strings.Contains(rest, "\n## "+title+"\n")) {
		return "", fmt.Errorf("the changelog already has a section %q", title)
	}
	section := ""
	if len(entries) > 0 {
		section = render(title, entries) + "\n"
	} else if title != unreleased {
		return "", errors.New("no entries to release")
	}
	return head + "\n\n" + section + rest, nil
}

// notRendered lists the entry lines ("- ...") of section that rendered does not have.
func notRendered(section, rendered string) []string {
	have := map[string]bool{}
	for _, line := range strings.Split(rendered, "\n") {
		have[line] = true
	}
	var lost []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "- ") && !have[line] {
			lost = append(lost, line)
		}
	}
	return lost
}
