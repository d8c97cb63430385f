// Package golden reads and checks the golden pdata files of the processors' tests: OTLP/JSON
// files of the input a processor gets and of the traces it must give. It is imported by tests
// only. New tests use contrib's pkg/golden (YAML) and pkg/pdatatest instead, as the svcscore
// connector's and the svc exporter's do; this package goes once the processors' tests have moved.
//
// Run a component's tests with -update to rewrite the expected files from the current behaviour,
// then review the diff before keeping it.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

var update = flag.Bool("update", false, "rewrite the expected golden files under testdata/ from the current output")

// ReadTraces reads OTLP/JSON traces from path.
func ReadTraces(t testing.TB, path string) ptrace.Traces {
	t.Helper()
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(readFile(t, path))
	if err != nil {
		t.Fatalf("golden file %s: %v", path, err)
	}
	return td
}

// ReadLogs reads OTLP/JSON logs from path.
func ReadLogs(t testing.TB, path string) plog.Logs {
	t.Helper()
	ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(readFile(t, path))
	if err != nil {
		t.Fatalf("golden file %s: %v", path, err)
	}
	return ld
}

// CheckTraces compares got with the traces in path, or writes them there with -update.
func CheckTraces(t testing.TB, path string, got ptrace.Traces) {
	t.Helper()
	raw, err := (&ptrace.JSONMarshaler{}).MarshalTraces(got)
	if err != nil {
		t.Fatal(err)
	}
	check(t, path, raw)
}

// CheckLogs compares got with the logs in path, or writes them there with -update.
func CheckLogs(t testing.TB, path string, got plog.Logs) {
	t.Helper()
	raw, err := (&plog.JSONMarshaler{}).MarshalLogs(got)
	if err != nil {
		t.Fatal(err)
	}
	check(t, path, raw)
}

func check(t testing.TB, path string, got []byte) {
	t.Helper()
	var indented bytes.Buffer
	if err := json.Indent(&indented, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	indented.WriteByte('\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, indented.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readFile(t, path)
	var wantValue, gotValue any
	if err := json.Unmarshal(want, &wantValue); err != nil {
		t.Fatalf("golden file %s: %v", path, err)
	}
	if err := json.Unmarshal(got, &gotValue); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(wantValue, gotValue) {
		t.Errorf("output differs from golden file %s (rerun with -update and review the diff):\n--- want\n%s\n--- got\n%s",
			path, want, indented.Bytes())
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file missing or unreadable (run with -update to write it): %v", err)
	}
	return raw
}
