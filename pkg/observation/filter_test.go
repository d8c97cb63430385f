package observation

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

var filterStart = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// generationView is a generation of a third-party instrumentation (metadata as sent):
// model gpt-4o, 3.5 s, error status, 100 + 50 tokens, cost 0.02.
func generationView() View {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("svc.environment", "prod")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("opentelemetry.instrumentation.openai")
	span := ss.Spans().AppendEmpty()
	span.SetName("chat gpt-4o")
	span.SetTraceID([16]byte{1})
	span.SetSpanID([8]byte{2})
	span.SetParentSpanID([8]byte{3})
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(filterStart))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(filterStart.Add(3500 * time.Millisecond)))
	span.Status().SetCode(ptrace.StatusCodeError)
	span.Status().SetMessage("rate limited")
	a := span.Attributes()
	a.PutStr("gen_ai.request.model", "gpt-4o")
	a.PutInt("gen_ai.usage.input_tokens", 100)
	a.PutInt("gen_ai.usage.output_tokens", 50)
	a.PutDouble("gen_ai.usage.cost", 0.02)
	a.PutStr("svc.session.id", "s-1")
	a.PutStr("svc.observation.metadata.tier", "gold")
	a.PutInt("svc.observation.metadata.attempt", 2)
	a.PutBool("svc.observation.metadata.cached", false)
	limits := a.PutEmptyMap("svc.observation.metadata.limits")
	limits.PutInt("rpm", 60)
	a.PutStr("svc.trace.metadata.tenant", "acme")
	a.PutStr("app.route", "/chat")
	return NewView(span, rs.Resource(), ss.Scope())
}

// sdkSpanView is a span of the Python SDK v5: metadata JSON-encoded, decoded by the platform.
func sdkSpanView() View {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("telemetry.sdk.language", "python")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("svc-sdk")
	ss.Scope().SetVersion("5.1.0")
	span := ss.Spans().AppendEmpty()
	span.SetName("lookup")
	span.SetTraceID([16]byte{1})
	span.SetSpanID([8]byte{4})
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(filterStart))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(filterStart.Add(100 * time.Millisecond)))
	a := span.Attributes()
	a.PutStr("svc.observation.type", "tool")
	a.PutStr("svc.observation.metadata.tier", `"gold"`)
	a.PutStr("svc.observation.metadata.attempt", `2`)
	a.PutStr("svc.observation.metadata.cached", `true`)
	a.PutStr("svc.observation.metadata.limits", `{"rpm":60,"burst":{"max":5}}`)
	a.PutStr("svc.observation.cost_details", `{"input":0.001,"output":0.002}`)
	a.PutStr("svc.observation.usage_details", `{"input":7,"output":3}`)
	return NewView(span, rs.Resource(), ss.Scope())
}

func TestFilterOperators(t *testing.T) {
	tests := []struct {
		filter           string
		generation, tool bool
	}{
		// string
		{`[{"type":"string","column":"type","operator":"=","value":"GENERATION"}]`, true, false},
		{`[{"type":"string","column":"type","operator":"=","value":"TOOL"}]`, false, true},
		{`[{"type":"string","column":"type","operator":"!=","value":"GENERATION"}]`, false, true},
		{`[{"type":"string","column":"name","operator":"contains","value":"gpt"}]`, true, false},
		{`[{"type":"string","column":"name","operator":"does not contain","value":"gpt"}]`, false, true},
		{`[{"type":"string","column":"name","operator":"starts with","value":"chat"}]`, true, false},
		{`[{"type":"string","column":"name","operator":"ends with","value":"up"}]`, false, true},
		{`[{"type":"string","column":"model","operator":"=","value":"gpt-4o"}]`, true, false},
		{`[{"type":"string","column":"model","operator":"!=","value":"gpt-4o"}]`, false, true},
		{`[{"type":"string","column":"level","operator":"=","value":"ERROR"}]`, true, false},
		{`[{"type":"string","column":"level","operator":"=","value":"DEFAULT"}]`, false, true},
		{`[{"type":"string","column":"statusMessage","operator":"contains","value":"rate"}]`, true, false},
		{`[{"type":"string","column":"environment","operator":"=","value":"prod"}]`, true, false},
		{`[{"type":"string","column":"environment","operator":"=","value":"default"}]`, false, true},
		{`[{"type":"string","column":"sessionId","operator":"=","value":"s-1"}]`, true, false},
		{`[{"type":"string","column":"id","operator":"=","value":"0400000000000000"}]`, false, true},
		{`[{"type":"string","column":"traceId","operator":"starts with","value":"01"}]`, true, true},
		{`[{"type":"string","column":"parentObservationId","operator":"=","value":"0300000000000000"}]`, true, false},
		{`[{"type":"string","column":"metadata.tier","operator":"=","value":"gold"}]`, true, true},
		{`[{"type":"string","column":"traceMetadata.tenant","operator":"=","value":"acme"}]`, true, false},
		{`[{"type":"string","column":"attributes.app.route","operator":"=","value":"/chat"}]`, true, false},
		// stringOptions
		{`[{"type":"stringOptions","column":"type","operator":"any of","value":["GENERATION","TOOL"]}]`, true, true},
		{`[{"type":"stringOptions","column":"type","operator":"any of","value":["AGENT"]}]`, false, false},
		{`[{"type":"stringOptions","column":"type","operator":"none of","value":["TOOL"]}]`, true, false},
		{`[{"type":"stringOptions","column":"model","operator":"none of","value":["gpt-4o"]}]`, false, true},
		// number
		{`[{"type":"number","column":"latency","operator":">","value":3}]`, true, false},
		{`[{"type":"number","column":"latency","operator":">=","value":3.5}]`, true, false},
		{`[{"type":"number","column":"latency","operator":"<","value":1}]`, false, true},
		{`[{"type":"number","column":"latency","operator":"<=","value":0.1}]`, false, true},
		{`[{"type":"number","column":"metadata.attempt","operator":"=","value":2}]`, true, true},
		{`[{"type":"number","column":"metadata.attempt","operator":"!=","value":2}]`, false, false},
		{`[{"type":"number","column":"metadata.limits.rpm","operator":"=","value":60}]`, true, true},
		{`[{"type":"number","column":"metadata.limits.burst.max","operator":">","value":4}]`, false, true},
		{`[{"type":"number","column":"metadata.tier","operator":"=","value":5}]`, false, false},
		{`[{"type":"number","column":"totalTokens","operator":"=","value":150}]`, true, false},
		{`[{"type":"number","column":"inputTokens","operator":"=","value":7}]`, false, true},
		{`[{"type":"number","column":"outputTokens","operator":">=","value":3}]`, true, true},
		{`[{"type":"number","column":"totalCost","operator":">","value":0.01}]`, true, false},
		{`[{"type":"number","column":"totalCost","operator":"<","value":0.01}]`, false, true},
		{`[{"type":"number","column":"attributes.gen_ai.usage.input_tokens","operator":">","value":99}]`, true, false},
		// boolean
		{`[{"type":"boolean","column":"metadata.cached","operator":"=","value":true}]`, false, true},
		{`[{"type":"boolean","column":"metadata.cached","operator":"!=","value":true}]`, true, false},
		// datetime
		{`[{"type":"datetime","column":"startTime","operator":">=","value":"2026-11-23T12:00:00Z"}]`, true, true},
		{`[{"type":"datetime","column":"startTime","operator":">","value":"2026-11-23T12:00:00Z"}]`, false, false},
		{`[{"type":"datetime","column":"endTime","operator":"<","value":"2026-11-23T12:00:01Z"}]`, false, true},
		{`[{"type":"datetime","column":"endTime","operator":"<=","value":"2026-11-23T12:00:03.5Z"}]`, true, true},
		// null
		{`[{"type":"null","column":"model","operator":"is null","value":""}]`, false, true},
		{`[{"type":"null","column":"model","operator":"is not null","value":null}]`, true, false},
		{`[{"type":"null","column":"metadata.limits.burst","operator":"is not null","value":""}]`, false, true},
		{`[{"type":"null","column":"parentObservationId","operator":"is null","value":""}]`, false, true},
		// every condition must hold; empty selects all
		{`[{"type":"string","column":"type","operator":"=","value":"GENERATION"},{"type":"number","column":"latency","operator":">","value":5}]`, false, false},
		{`[]`, true, true},
		{``, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			f, err := ParseFilter(tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			gen, tool := generationView(), sdkSpanView()
			if got := f.Match(&gen); got != tt.generation {
				t.Errorf("generation: got %v, want %v", got, tt.generation)
			}
			if got := f.Match(&tool); got != tt.tool {
				t.Errorf("tool: got %v, want %v", got, tt.tool)
			}
		})
	}
}

// Every operator of every type is accepted on a column of that type.
func TestFilterEveryOperatorParses(t *testing.T) {
	columns := map[string]string{"string": "name", "stringOptions": "name", "number": "latency", "boolean": "metadata.x", "datetime": "startTime", "null": "model"}
	values := map[string]string{"string": `"a"`, "stringOptions": `["a"]`, "number": `1`, "boolean": `true`, "datetime": `"2026-01-01T00:00:00Z"`, "null": `null`}
	for typ, ops := range operatorsByType {
		for _, op := range ops {
			text := `[{"type":"` + typ + `","column":"` + columns[typ] + `","operator":"` + op + `","value":` + values[typ] + `}]`
			if _, err := ParseFilter(text); err != nil {
				t.Errorf("%s: %v", text, err)
			}
		}
	}
}

func TestFilterErrors(t *testing.T) {
	tests := []struct{ filter, want string }{
		{`{"type":"string"}`, "filter must be a JSON array of objects with the keys type, column, operator, value"},
		{`type = GENERATION`, "filter must be a JSON array"},
		{`[{"type":"string","column":"name","operator":"=","value":"a","key":"x"}]`, `unknown field "key"`},
		{`[{"type":"string","column":"name","value":"a"}]`, "filter[0]: missing key(s) operator"},
		{`[{}]`, "filter[0]: missing key(s) type, column, operator, value"},
		{`[] []`, "found text after it"},
		{`[{"type":"text","column":"name","operator":"=","value":"a"}]`, `filter[0]: unknown type "text" (one of string, stringOptions, number, boolean, datetime, null)`},
		{`[{"type":"string","column":"name","operator":"=","value":"a"},{"type":"string","column":"name","operator":"~","value":"a"}]`,
			`filter[1]: operator "~" is not a string operator (one of "=", "!=", "contains", "does not contain", "starts with", "ends with")`},
		{`[{"type":"number","column":"latency","operator":"contains","value":1}]`, `operator "contains" is not a number operator`},
		{`[{"type":"boolean","column":"metadata.x","operator":"<>","value":true}]`, `operator "<>" is not a boolean operator (one of "=", "!=")`},
		{`[{"type":"string","column":"colour","operator":"=","value":"a"}]`, `filter[0]: unknown column "colour" (one of endTime, environment, id,`},
		{`[{"type":"string","column":"metadata.","operator":"=","value":"a"}]`, `column "metadata." names no key`},
		{`[{"type":"string","column":"name","operator":"=","value":5}]`, `filter[0]: column "name": a string filter needs a string value, got 5`},
		{`[{"type":"number","column":"name","operator":">","value":5}]`, `column "name": not a number column (name takes string, stringOptions)`},
		{`[{"type":"number","column":"latency","operator":">","value":"5s"}]`, `a number filter needs a numeric value, got "5s"`},
		{`[{"type":"string","column":"latency","operator":"=","value":"5"}]`, `not a string column (latency takes number)`},
		{`[{"type":"boolean","column":"metadata.x","operator":"=","value":"yes"}]`, `a boolean filter needs true or false, got "yes"`},
		{`[{"type":"datetime","column":"startTime","operator":">","value":"yesterday"}]`, `a datetime filter needs an RFC 3339 string, got "yesterday"`},
		{`[{"type":"datetime","column":"name","operator":">","value":"2026-01-01T00:00:00Z"}]`, `not a datetime column`},
		{`[{"type":"stringOptions","column":"type","operator":"any of","value":"GENERATION"}]`, `a stringOptions filter needs a non-empty array of strings`},
		{`[{"type":"stringOptions","column":"type","operator":"any of","value":[]}]`, `a stringOptions filter needs a non-empty array of strings`},
		{`[{"type":"null","column":"name","operator":"is null","value":""}]`, `column "name": always has a value`},
		{`[{"type":"null","column":"model","operator":"is null","value":"x"}]`, `a null filter takes the value "" or null`},
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			_, err := ParseFilter(tt.filter)
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
}
