package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"fmt"
	"time"
)

// defaultContentWait bounds how long a span that may still receive content waits for its records.
// Applications export spans and logs in separate batches, typically a few seconds apart.
const defaultContentWait = 5 * time.Second

// ContentJoinConfig rules the join of GenAI content that instrumentations send as log records
// (gen_ai.*.message, gen_ai.choice, gen_ai.client.inference.operation.details) onto their spans.
type ContentJoinConfig struct {
	// Enabled: when false the logs processor passes every record on unchanged and no span waits for
	// content.
	Enabled bool `mapstructure:"enabled"`
	// Wait bounds the wait of a content candidate span for its output records, and of records for
	// their span.
	Wait time.Duration `mapstructure:"wait"`
	// InstrumentationScopes add scopes whose inference spans may wait for content records, beside
	// the built-in list of instrumentations known to emit them (matched as the keep rules' scopes).
	InstrumentationScopes []string `mapstructure:"instrumentation_scopes"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func defaultContentJoinConfig() ContentJoinConfig {
	return ContentJoinConfig{Enabled: true, Wait: defaultContentWait}
}

// validate: the wait is also capped by the trace memory's own limits (trace_integrity), which win.
func (cj ContentJoinConfig) validate() []error {
	var errs []error
	if cj.Enabled && cj.Wait <= 0 {
		errs = append(errs, fmt.Errorf("content_join.wait must be positive, got %v", cj.Wait))
	}
	errs = append(errs, validateScopes("content_join.instrumentation_scopes", cj.InstrumentationScopes)...)
	return errs
}
