package svcattr

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestIsExperiment(t *testing.T) {
	tests := []struct {
		attrs map[string]any
		want  bool
	}{
		{map[string]any{"svc.experiment.id": "exp-1"}, true},
		{map[string]any{"svc.experiment.item.version": "v2"}, true},
		{map[string]any{"svc.environment": "sdk-experiment"}, true},
		{map[string]any{"svc.environment": "production"}, false},
		{map[string]any{"svc.environment": int64(1)}, false},
		{map[string]any{"svc.experimental": true}, false},
		{map[string]any{"gen_ai.request.model": "gpt-4o", "svc.experiment.name": "baseline"}, true},
		{map[string]any{}, false},
	}
	for _, tt := range tests {
		attrs := pcommon.NewMap()
		if err := attrs.FromRaw(tt.attrs); err != nil {
			t.Fatal(err)
		}
		if got := IsExperiment(attrs); got != tt.want {
			t.Errorf("IsExperiment(%v) = %v, want %v", tt.attrs, got, tt.want)
		}
	}
}

func TestIsNewSDKEncoding(t *testing.T) {
	tests := []struct {
		name         string
		scope        string
		scopeVersion string
		language     any // nil: attribute absent
		want         bool
	}{
		{name: "JS v6", scope: "svc-sdk", scopeVersion: "6.0.0", language: "nodejs", want: true},
		{name: "JS v7", scope: "svc-sdk", scopeVersion: "7.1.2", language: "webjs", want: true},
		{name: "JS v5", scope: "svc-sdk", scopeVersion: "5.9.1", language: "nodejs", want: false},
		{name: "Python v5", scope: "svc-sdk", scopeVersion: "5.0.0", language: "python", want: true},
		{name: "Python v4", scope: "svc-sdk", scopeVersion: "4.3.0", language: "python", want: false},
		{name: "Python v5 with v prefix", scope: "svc-sdk", scopeVersion: "v5.1.0", language: "Python", want: true},
		{name: "unknown language", scope: "svc-sdk", scopeVersion: "9.0.0", language: "go", want: false},
		{name: "no language", scope: "svc-sdk", scopeVersion: "6.0.0", language: nil, want: false},
		{name: "unreadable version", scope: "svc-sdk", scopeVersion: "latest", language: "nodejs", want: false},
		{name: "another scope", scope: "opentelemetry.instrumentation.openai", scopeVersion: "6.0.0", language: "python", want: false},
		{name: "Python v5 pre-release", scope: "svc-sdk", scopeVersion: "5.0.0b1", language: "python", want: true},
		{name: "JS v6 in the browser", scope: "svc-sdk", scopeVersion: "6.0.0", language: "javascript", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := pcommon.NewResource()
			if tt.language != nil {
				res.Attributes().PutStr(TelemetrySDKLanguage, tt.language.(string))
			}
			scope := pcommon.NewInstrumentationScope()
			scope.SetName(tt.scope)
			scope.SetVersion(tt.scopeVersion)
			if got := IsNewSDKEncoding(res, scope); got != tt.want {
				t.Errorf("IsNewSDKEncoding = %v, want %v", got, tt.want)
			}
			// No resource attribute changes the rule: the platform knows no marker.
			res.Attributes().PutStr("svc.metadata.encoding", "json")
			if got := IsNewSDKEncoding(res, scope); got != tt.want {
				t.Errorf("IsNewSDKEncoding with an svc.metadata.encoding attribute = %v, want %v", got, tt.want)
			}
		})
	}
}
