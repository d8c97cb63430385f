package platform

import (
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Through the endpoint: what a request's spans become (the field rules are in records_test.go).
func TestObservationFields(t *testing.T) {
	p := startPlatform(t)
	res := testResource{attrs: map[string]any{"service.name": "agent", "svc.environment": "staging"}, scopeName: "lib", scopeVersion: "1.2.3"}
	sendSpans(t, p, res,
		testSpan{traceID: 1, spanID: 1, name: "root", status: ptrace.StatusCodeError, attrs: map[string]any{
			"svc.observation.input":  `{"q":1}`,
			"svc.observation.output": "plain text",
			"gen_ai.input.messages":  "ignored: svc input wins",
			"svc.environment":        "prod",
			"session.id":             "s-1",
		}},
		testSpan{traceID: 1, spanID: 2, parent: 1, name: "llm", attrs: map[string]any{
			"gen_ai.input.messages":      `[{"role":"user"}]`,
			"gen_ai.output.messages":     `[{"role":"assistant"}]`,
			"gen_ai.request.model":       "gpt-x",
			"gen_ai.response.model":      "gpt-x-2025",
			"gen_ai.usage.input_tokens":  int64(10),
			"gen_ai.usage.output_tokens": int64(5),
			"svc.session.id":             "s-2",
		}},
	)
	root, _ := p.Observation(hexTrace(1), hexSpan(1))
	llm, _ := p.Observation(hexTrace(1), hexSpan(2))
	checks := []struct {
		name      string
		got, want any
	}{
		{"root input", root.Input, `{"q":1}`},
		{"root output", root.Output, "plain text"},
		{"root level", root.Level, LevelError},
		{"root environment from span", root.Environment, "prod"},
		{"root session", root.SessionID, "s-1"},
		{"root parent", root.ParentObservationID, ""},
		{"root usage", root.Usage, map[string]int64(nil)},
		{"llm type", llm.Type, TypeGeneration},
		{"llm input from gen_ai", llm.Input, `[{"role":"user"}]`},
		{"llm output from gen_ai", llm.Output, `[{"role":"assistant"}]`},
		{"llm model: response model first", llm.Model, "gpt-x-2025"},
		{"llm usage", llm.Usage, map[string]int64{"input": 10, "output": 5}},
		{"llm level", llm.Level, LevelDefault},
		{"llm environment from resource", llm.Environment, "staging"},
		{"llm svc session wins", llm.SessionID, "s-2"},
		{"llm parent", llm.ParentObservationID, hexSpan(1)},
		{"scope", llm.ScopeName + "@" + llm.ScopeVersion, "lib@1.2.3"},
		{"resource attributes", llm.ResourceAttributes["service.name"], "agent"},
		{"raw attributes", llm.Attributes["gen_ai.usage.input_tokens"], int64(10)},
		{"metadata scope", llm.Metadata["scope.name"], "lib"},
		{"start", llm.StartTime, testStart.Add(1e9)},
		{"end", llm.EndTime.Sub(llm.StartTime).Seconds(), 1.5},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.name, c.got, c.want)
		}
	}
	tr, ok := p.Trace(hexTrace(1))
	if !ok || tr.Name != "root" || tr.SessionID != "s-2" || tr.Input != `{"q":1}` {
		t.Errorf("trace %+v: want the root's name and input and the later span's session", tr)
	}
	sendSpans(t, p, testResource{}, testSpan{traceID: 2, spanID: 1, name: "bare"})
	if bare, _ := p.Observation(hexTrace(2), hexSpan(1)); bare.Environment != DefaultEnvironment {
		t.Errorf("environment of a span naming none: %q, want %q", bare.Environment, DefaultEnvironment)
	}
}

// The platform has no SDK-name or SDK-version branch in metadata decoding (docs/contract.md §5.2): the
// same attributes read back the same from every sender; JSON-looking values are parsed on read.
func TestMetadataHasNoSDKBranch(t *testing.T) {
	attrs := map[string]any{
		"svc.observation.metadata.text":   `"prod"`,
		"svc.observation.metadata.num":    "5",
		"svc.observation.metadata.bare":   "prod",
		"svc.observation.metadata.int":    int64(7),
		"svc.observation.metadata.broken": `{not json`,
		"svc.trace.metadata.user":         `"u-1"`,
	}
	want := map[string]any{"text": "prod", "num": 5.0, "bare": "prod", "int": 7.0, "broken": `{not json`}
	python := map[string]any{"telemetry.sdk.language": "python"}
	nodejs := map[string]any{"telemetry.sdk.language": "nodejs"}
	tests := []struct {
		name string
		res  testResource
	}{
		{"python sdk v5", testResource{attrs: python, scopeName: "svc-sdk", scopeVersion: "5.0.1"}},
		{"python sdk v4", testResource{attrs: python, scopeName: "svc-sdk", scopeVersion: "4.9.0"}},
		{"js sdk v6", testResource{attrs: nodejs, scopeName: "svc-sdk", scopeVersion: "6.2.0"}},
		{"js sdk v5", testResource{attrs: nodejs, scopeName: "svc-sdk", scopeVersion: "5.1.0"}},
		{"third-party", testResource{scopeName: "opentelemetry.instrumentation.openai"}},
	}
	p := startPlatform(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := byte(i + 1)
			sendSpans(t, p, tt.res, testSpan{traceID: id, spanID: id, name: "s", attrs: attrs})
			o, _ := p.Observation(hexTrace(id), hexSpan(id))
			for k, w := range want {
				if !reflect.DeepEqual(o.Metadata[k], w) {
					t.Errorf("metadata[%q] = %#v, want %#v", k, o.Metadata[k], w)
				}
			}
			if !reflect.DeepEqual(o.TraceMetadata, map[string]any{"user": "u-1"}) {
				t.Errorf("trace metadata %#v", o.TraceMetadata)
			}
		})
	}
}
