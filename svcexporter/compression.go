package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/collector/config/configcompression"
)

// compressionNone disables compression; configcompression accepts it but exports no name for it.
const compressionNone configcompression.Type = "none"

// compressionEnvVars are read in this order when the config does not set `compression`; the
// first one that is set wins (docs/contract.md §4: the SDKs honour SVC_OTEL_COMPRESSION and the two
// standard OTLP variables).
var compressionEnvVars = []string{
	"SVC_OTEL_COMPRESSION",
	"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
	"OTEL_EXPORTER_OTLP_COMPRESSION",
}

// resolveCompression returns the compression of span batches: the config's when set, else the
// first set environment variable, else gzip. An environment value other than gzip or none is an
// error, so that a typo fails the collector's start instead of silently changing the wire format;
// setting `compression` in the config overrides the environment.
func resolveCompression(configured configcompression.Type, lookupEnv func(string) (string, bool)) (configcompression.Type, error) {
	if configured != "" {
		return configured, nil
	}
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	for _, name := range compressionEnvVars {
		raw, ok := lookupEnv(name)
		if !ok || strings.TrimSpace(raw) == "" {
			continue
		}
		switch configcompression.Type(strings.ToLower(strings.TrimSpace(raw))) {
		case configcompression.TypeGzip:
			return configcompression.TypeGzip, nil
		case compressionNone:
			return compressionNone, nil
		default:
			return "", fmt.Errorf("environment variable %s=%q is not a compression the svc exporter supports (gzip or none); fix the variable or set `compression` in the exporter config", name, raw)
		}
	}
	return configcompression.TypeGzip, nil
}
