// Command chlog keeps CHANGELOG.md the way the collector and contrib keep theirs (chloggen): one
// YAML file per change under .chloggen/, rendered into CHANGELOG.md under a release heading.
//
//	go run ./tools/chlog validate          # every entry is well formed
//	go run ./tools/chlog check             # and CHANGELOG.md is their rendering (part of `make lint`)
//	go run ./tools/chlog update            # render the entries as the "## Unreleased" section
//	go run ./tools/chlog update -version v0.2.0  # release: render them as "## v0.2.0", delete the files
//
// An entry's component is one of a fixed list: `<class>/<type>` of each component's metadata.yaml
// (e.g. exporter/svc), `pkg/<dir>` of a package under pkg/, or an area (distribution, docs,
// testbed). Its note is one line of at most 120 characters, its subtext at most 3 lines: the
// changelog is read line by line, details belong in the component's README.
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
	"unicode/utf8"

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

	maxNote         = 120
	maxSubtextLines = 3
)

// areas are the components of a change that is not in one component or package.
var areas = []string{"distribution", "docs", "testbed"}

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
		return errors.New("usage: chlog validate|check|update [-dir .chloggen] [-changelog CHANGELOG.md] [-root .] [-version vX.Y.Z]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dir := fs.String("dir", ".chloggen", "directory of the entry files")
	changelog := fs.String("changelog", "CHANGELOG.md", "the changelog to update")
	version := fs.String("version", "", "release heading (e.g. v0.2.0); empty: the Unreleased section")
	force := fs.Bool("force", false, "replace the Unreleased section even if it has entries no .chloggen file renders")
	root := fs.String("root", ".", "the repository: its */metadata.yaml and pkg/ name the components an entry may have")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	components, err := componentsOf(*root)
	if err != nil {
		return err
	}
	entries, err := readEntries(*dir, components)
	if err != nil {
		return err
	}
	switch args[0] {
	case "validate":
		fmt.Printf("chlog: %d entries in %s are valid\n", len(entries), *dir)
		return nil
	case "check":
		old, err := os.ReadFile(*changelog)
		if err != nil {
			return err
		}
		rendered, err := update(string(old), unreleased, entries, false)
		if err != nil {
			return err
		}
		if rendered != string(old) {
			return fmt.Errorf("%s is not the rendering of the %d entries in %s: run `make changelog` and commit the result", *changelog, len(entries), *dir)
		}
		fmt.Printf("chlog: %d entries in %s are valid and rendered in %s\n", len(entries), *dir, *changelog)
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
	return fmt.Errorf("unknown command %q (validate, check, update)", args[0])
}

// componentsOf is the list an entry's component must be in: `<class>/<type>` of every
// <root>/*/metadata.yaml, `pkg/<dir>` of every directory under <root>/pkg, and the areas.
func componentsOf(root string) (map[string]bool, error) {
	known := map[string]bool{}
	for _, a := range areas {
		known[a] = true
	}
	files, err := filepath.Glob(filepath.Join(root, "*", "metadata.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var md struct {
			Type   string `yaml:"type"`
			Status struct {
				Class string `yaml:"class"`
			} `yaml:"status"`
		}
		if err := yaml.Unmarshal(data, &md); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if md.Type == "" || md.Status.Class == "" {
			return nil, fmt.Errorf("%s: no type or status.class", f)
		}
		known[md.Status.Class+"/"+md.Type] = true
	}
	dirs, err := os.ReadDir(filepath.Join(root, "pkg"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, d := range dirs {
		if d.IsDir() {
			known["pkg/"+d.Name()] = true
		}
	}
	return known, nil
}

// readEntries reads and validates every *.yaml file of dir but the template, in name order; an
// entry's component must be one of components.
func readEntries(dir string, components map[string]bool) ([]Entry, error) {
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
		e, err := readEntry(name, components)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries = append(entries, e)
	}
	return entries, errors.Join(errs...)
}

func readEntry(name string, components map[string]bool) (Entry, error) {
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
	return e, e.validate(components)
}

func (e Entry) validate(components map[string]bool) error {
	var problems []string
	if heading(e.ChangeType) == "" {
		problems = append(problems, fmt.Sprintf("change_type %q is not one of breaking, deprecation, new_component, enhancement, bug_fix", e.ChangeType))
	}
	switch c := strings.TrimSpace(e.Component); {
	case c == "":
		problems = append(problems, "component is empty")
	case !components[c]:
		problems = append(problems, fmt.Sprintf("component %q is not one of %s", c, strings.Join(sortedKeys(components), ", ")))
	}
	switch note := strings.TrimSpace(e.Note); {
	case note == "":
		problems = append(problems, "note is empty")
	case strings.Contains(note, "\n"):
		problems = append(problems, "note must be one line (details go in subtext)")
	case utf8.RuneCountInString(note) > maxNote:
		problems = append(problems, fmt.Sprintf("note has %d characters, at most %d (details go in subtext or the README)", utf8.RuneCountInString(note), maxNote))
	}
	if n := len(subtextLines(e.Subtext)); n > maxSubtextLines {
		problems = append(problems, fmt.Sprintf("subtext has %d lines, at most %d (details go in the component's README)", n, maxSubtextLines))
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

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// subtextLines are the subtext's non-empty lines, as render writes them.
func subtextLines(subtext string) []string {
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(subtext), "\n") {
		if line = strings.TrimRight(line, " \t"); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
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
			for _, line := range subtextLines(e.Subtext) {
				fmt.Fprintf(&b, "  %s\n", line)
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
