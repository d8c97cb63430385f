package svcmetadataprocessor

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Golden files are read and checked with pkg/golden (go test -run TestGolden -update rewrites the
// expected files; review the diff before keeping it).

// tracesJSON renders traces as indented OTLP/JSON, to compare two outputs exactly.
func tracesJSON(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	raw, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, json.Indent(&out, raw, "", "  "))
	return out.Bytes()
}

// runProcessor processes td with cfg.
func runProcessor(t testing.TB, cfg *Config, td ptrace.Traces) ptrace.Traces {
	t.Helper()
	p, err := newMetadataProcessor(cfg, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	out, err := p.processTraces(context.Background(), td)
	require.NoError(t, err)
	return out
}
