package svcmetadataprocessor

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// -update rewrites the expected golden files from the processor's current output; review the
// diff before committing it.
var update = flag.Bool("update", false, "rewrite testdata/golden/*.expected.json")

// readTraces reads OTLP/JSON traces from a file.
func readTraces(t testing.TB, path string) ptrace.Traces {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(raw)
	require.NoError(t, err, path)
	return td
}

// tracesJSON renders traces as indented OTLP/JSON, the form of the golden files.
func tracesJSON(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	raw, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, json.Indent(&out, raw, "", "  "))
	out.WriteByte('\n')
	return out.Bytes()
}

// runProcessor processes td with cfg through the factory-built processor.
func runProcessor(t testing.TB, cfg *Config, td ptrace.Traces) ptrace.Traces {
	t.Helper()
	p, err := newMetadataProcessor(cfg, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	out, err := p.processTraces(context.Background(), td)
	require.NoError(t, err)
	return out
}

// checkGolden compares td with testdata/golden/<name>.expected.json (or rewrites it with -update).
func checkGolden(t *testing.T, name string, td ptrace.Traces) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".expected.json")
	got := tracesJSON(t, td)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o600))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test -run %s -update", t.Name())
	require.Equal(t, string(want), string(got), "output differs from %s", path)
}
