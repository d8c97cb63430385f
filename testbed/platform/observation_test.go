package platform

import (
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestObservationType(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]any
		want  string
	}{
		{"no hints", map[string]any{"http.method": "GET"}, TypeSpan},
		{"explicit type upper-cased", map[string]any{"svc.observation.type": "tool"}, "TOOL"},
		{"explicit type wins over model", map[string]any{"svc.observation.type": "span", "gen_ai.request.model": "m"}, TypeSpan},
		{"empty explicit type is ignored", map[string]any{"svc.observation.type": "", "gen_ai.request.model": "m"}, TypeGeneration},
		{"request model", map[string]any{"gen_ai.request.model": "m"}, TypeGeneration},
		{"response model", map[string]any{"gen_ai.response.model": "m"}, TypeGeneration},
		{"chat operation", map[string]any{"gen_ai.operation.name": "chat"}, TypeGeneration},
		{"text_completion operation", map[string]any{"gen_ai.operation.name": "text_completion"}, TypeGeneration},
		{"generate_content operation", map[string]any{"gen_ai.operation.name": "generate_content"}, TypeGeneration},
		{"other operation", map[string]any{"gen_ai.operation.name": "execute_tool"}, TypeSpan},
	}
	p := startPlatform(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := byte(i + 1)
			sendSpans(t, p, testResource{}, testSpan{traceID: id, spanID: id, name: tt.name, attrs: tt.attrs})
			o, ok := p.Observation(hexTrace(id), hexSpan(id))
			if !ok {
				t.Fatal("span not stored")
			}
			if o.Type != tt.want {
				t.Errorf("type %q, want %q", o.Type, tt.want)
			}
		})
	}
}

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
		{"root usage", root.Usage, (*Usage)(nil)},
		{"llm input from gen_ai", llm.Input, `[{"role":"user"}]`},
		{"llm output from gen_ai", llm.Output, `[{"role":"assistant"}]`},
		{"llm model: request model first", llm.Model, "gpt-x"},
		{"llm usage", *llm.Usage, Usage{Input: 10, Output: 5, Total: 15}},
		{"llm level", llm.Level, LevelDefault},
		{"llm environment from resource", llm.Environment, "staging"},
		{"llm svc session wins", llm.SessionID, "s-2"},
		{"llm parent", llm.ParentObservationID, hexSpan(1)},
		{"scope", llm.ScopeName + "@" + llm.ScopeVersion, "lib@1.2.3"},
		{"resource attributes", llm.ResourceAttributes["service.name"], "agent"},
		{"raw attributes", llm.Attributes["gen_ai.usage.input_tokens"], int64(10)},
		{"start", llm.StartTime, testStart.Add(1e9)},
		{"end", llm.EndTime.Sub(llm.StartTime).Seconds(), 1.5},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.name, c.got, c.want)
		}
	}
	sendSpans(t, p, testResource{}, testSpan{traceID: 2, spanID: 1, name: "bare"})
	if bare, _ := p.Observation(hexTrace(2), hexSpan(1)); bare.Environment != DefaultEnvironment {
		t.Errorf("environment of a span naming none: %q, want %q", bare.Environment, DefaultEnvironment)
	}
}

// The platform decodes JSON metadata only for spans from JS/TS v6+ / Python v5+ (docs/contract.md §5);
// every other span's metadata is stored as it arrives, with its OTLP type.
func TestMetadataDecoding(t *testing.T) {
	// The same attributes, sent by resources and scopes the rule does or does not decode.
	attrs := map[string]any{
		"svc.observation.metadata.text":   `"prod"`,
		"svc.observation.metadata.num":    "5",
		"svc.observation.metadata.flag":   "true",
		"svc.observation.metadata.obj":    `{"a":{"b":1}}`,
		"svc.observation.metadata.list":   `[1,"x"]`,
		"svc.observation.metadata.broken": `{not json`,
		"svc.observation.metadata.bare":   "prod",
		"svc.observation.metadata.int":    int64(7),
		"svc.observation.metadata.double": 2.5,
		"svc.observation.metadata.bool":   false,
		"svc.observation.metadata.slice":  []any{"a", int64(1)},
		"svc.observation.metadata.map":    map[string]any{"tier": "gold"},
		"svc.trace.metadata.user":         `"u-1"`,
		"svc.observation.metadata":        `{"flattened":"by the processor, never merged here"}`,
	}
	decoded := map[string]any{
		"text": "prod", "num": 5.0, "flag": true, "obj": map[string]any{"a": map[string]any{"b": 1.0}},
		"list": []any{1.0, "x"}, "broken": `{not json`, "bare": "prod", "int": 7.0,
		"double": 2.5, "bool": false, "slice": []any{"a", 1.0}, "map": map[string]any{"tier": "gold"},
	}
	asArrived := map[string]any{
		"text": `"prod"`, "num": "5", "flag": "true", "obj": `{"a":{"b":1}}`,
		"list": `[1,"x"]`, "broken": `{not json`, "bare": "prod", "int": int64(7),
		"double": 2.5, "bool": false, "slice": []any{"a", int64(1)}, "map": map[string]any{"tier": "gold"},
	}
	python := map[string]any{"telemetry.sdk.language": "python"}
	nodejs := map[string]any{"telemetry.sdk.language": "nodejs"}
	tests := []struct {
		name          string
		res           testResource
		wantDecoded   bool
		wantMetadata  map[string]any
		wantTraceUser any
	}{
		{"python sdk v5", testResource{attrs: python, scopeName: "svc-sdk", scopeVersion: "5.0.1"}, true, decoded, "u-1"},
		{"python sdk v5 pre-release", testResource{attrs: python, scopeName: "svc-sdk", scopeVersion: "5.0.0b1"}, true, decoded, "u-1"},
		{"js sdk v6", testResource{attrs: nodejs, scopeName: "svc-sdk", scopeVersion: "6.2.0"}, true, decoded, "u-1"},
		{"browser js sdk v7 with v prefix", testResource{attrs: map[string]any{"telemetry.sdk.language": "webjs"}, scopeName: "svc-sdk", scopeVersion: "v7.0.0"}, true, decoded, "u-1"},
		{"python sdk v4", testResource{attrs: python, scopeName: "svc-sdk", scopeVersion: "4.9.0"}, false, asArrived, `"u-1"`},
		{"js sdk v5", testResource{attrs: nodejs, scopeName: "svc-sdk", scopeVersion: "5.1.0"}, false, asArrived, `"u-1"`},
		{"svc-sdk scope without a language", testResource{scopeName: "svc-sdk", scopeVersion: "6.0.0"}, false, asArrived, `"u-1"`},
		{"svc-sdk scope of another language", testResource{attrs: map[string]any{"telemetry.sdk.language": "go"}, scopeName: "svc-sdk", scopeVersion: "6.0.0"}, false, asArrived, `"u-1"`},
		{"third-party", testResource{scopeName: "opentelemetry.instrumentation.openai"}, false, asArrived, `"u-1"`},
		{"third-party python at version 5", testResource{attrs: python, scopeName: "openinference.instrumentation.openai", scopeVersion: "5.0.0"}, false, asArrived, `"u-1"`},
		// An older gateway marked resources svc.metadata.encoding=json; the platform knows no such
		// attribute, so a marked third-party span is stored as it arrives.
		{"third-party with a marker attribute", testResource{attrs: map[string]any{"svc.metadata.encoding": "json"}, scopeName: "opentelemetry.instrumentation.openai"}, false, asArrived, `"u-1"`},
	}
	p := startPlatform(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := byte(i + 1)
			sendSpans(t, p, tt.res, testSpan{traceID: id, spanID: id, name: "s", attrs: attrs})
			o, _ := p.Observation(hexTrace(id), hexSpan(id))
			if o.MetadataJSONEncoded != tt.wantDecoded {
				t.Errorf("MetadataJSONEncoded = %v, want %v", o.MetadataJSONEncoded, tt.wantDecoded)
			}
			if !reflect.DeepEqual(o.Metadata, tt.wantMetadata) {
				t.Errorf("metadata\n got %#v\nwant %#v", o.Metadata, tt.wantMetadata)
			}
			if !reflect.DeepEqual(o.TraceMetadata, map[string]any{"user": tt.wantTraceUser}) {
				t.Errorf("trace metadata %#v, want user %#v", o.TraceMetadata, tt.wantTraceUser)
			}
		})
	}
}
