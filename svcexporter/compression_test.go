package svcexporter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configcompression"
)

func TestResolveCompression(t *testing.T) {
	tests := []struct {
		name       string
		configured configcompression.Type
		env        map[string]string
		want       configcompression.Type
		wantErr    []string
	}{
		{name: "nothing set: gzip", want: "gzip"},
		{name: "config wins", configured: "none", env: map[string]string{"SVC_OTEL_COMPRESSION": "gzip"}, want: "none"},
		{name: "config wins over a bad variable", configured: "gzip", env: map[string]string{"SVC_OTEL_COMPRESSION": "lzma"}, want: "gzip"},
		{name: "svc variable first", env: map[string]string{"SVC_OTEL_COMPRESSION": "none", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip"}, want: "none"},
		{name: "traces variable second", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}, want: "none"},
		{name: "generic variable last", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "none"}, want: "none"},
		{name: "blank variable is skipped", env: map[string]string{"SVC_OTEL_COMPRESSION": "  ", "OTEL_EXPORTER_OTLP_COMPRESSION": "none"}, want: "none"},
		{name: "upper case", env: map[string]string{"SVC_OTEL_COMPRESSION": "GZIP"}, want: "gzip"},
		{
			name: "unknown value is an error naming the variable", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
			wantErr: []string{`OTEL_EXPORTER_OTLP_COMPRESSION="zstd"`, "gzip or none", "`compression`"},
		},
		{
			name: "first set variable decides even when bad", env: map[string]string{"SVC_OTEL_COMPRESSION": "brotli", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"},
			wantErr: []string{"SVC_OTEL_COMPRESSION"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(name string) (string, bool) {
				v, ok := tt.env[name]
				return v, ok
			}
			got, err := resolveCompression(tt.configured, lookup)
			if len(tt.wantErr) > 0 {
				require.Error(t, err)
				for _, part := range tt.wantErr {
					assert.Contains(t, err.Error(), part)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
