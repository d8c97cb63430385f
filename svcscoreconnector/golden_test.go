package svcscoreconnector

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Run `go test -run Golden -update` to rewrite the expected files from the current behaviour;
// review the diff before keeping it.
var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func readTraces(t testing.TB, path string) ptrace.Traces {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(raw)
	require.NoError(t, err, path)
	return td
}

func readLogs(t testing.TB, path string) plog.Logs {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(raw)
	require.NoError(t, err, path)
	return ld
}

// assertGoldenLogs compares got with the OTLP JSON in path (or writes it there with -update).
func assertGoldenLogs(t *testing.T, path string, got plog.Logs) {
	t.Helper()
	raw, err := (&plog.JSONMarshaler{}).MarshalLogs(got)
	require.NoError(t, err)
	var indented bytes.Buffer
	require.NoError(t, json.Indent(&indented, raw, "", "  "))
	indented.WriteByte('\n')
	if *update {
		require.NoError(t, os.WriteFile(path, indented.Bytes(), 0o600))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run with -update")
	assert.JSONEq(t, string(want), indented.String())
}
