package svcmetadataprocessor

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/svc/svc-collector/pkg/golden"
	"github.com/svc/svc-collector/pkg/masking"
	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcmetadataprocessor/internal/metadatatest"
)

func maskingTestConfig() *Config {
	cfg := createDefaultConfig()
	cfg.Masking.BuiltinRules = []string{"email", "card_number", "api_key"}
	cfg.Masking.Rules = []masking.Rule{{Name: "employee-id", Pattern: `EMP-\d{4}`, Replacement: "EMP-****"}}
	cfg.Masking.Keys = []string{"password", "api_key"}
	return cfg
}

// goldenCases pairs each testdata/golden/<name>.input.json with the configuration it runs under.
var goldenCases = []struct {
	name string
	cfg  func() *Config
}{
	{"encoding_types", createDefaultConfig},
	{"encoding_types_new_sdk", createDefaultConfig},
	{"encoding_sdk_versions", createDefaultConfig},
	{"bare_metadata", createDefaultConfig},
	{"promote", createDefaultConfig},
	{"promote_disabled", func() *Config {
		cfg := createDefaultConfig()
		cfg.Promote = PromoteConfig{}
		return cfg
	}},
	{"limit", createDefaultConfig},
	{"trace_io", createDefaultConfig},
	{"trace_io_disabled", func() *Config {
		cfg := createDefaultConfig()
		cfg.UpgradeTraceIO = false
		return cfg
	}},
	{"masking", maskingTestConfig},
	{"coverage_vercel_ai", coverageConfig},
	{"coverage_openllmetry", coverageConfig},
	{"coverage_genai_events", coverageConfig},
	{"coverage_exception", coverageConfig},
	{"coverage_mlflow", coverageConfig},
	{"coverage_pydantic_ai", coverageConfig},
	{"coverage_langsmith", coverageConfig},
	{"coverage_openinference", coverageConfig},
	{"coverage_svc_sdk", coverageConfig},
}

// coverageConfig is the masking of the distribution's default configuration.
func coverageConfig() *Config {
	cfg := createDefaultConfig()
	cfg.Masking.BuiltinRules = masking.BuiltinRuleNames()
	return cfg
}

// The coverage golden files hold each instrumentation's real attribute and event shapes with
// personal data in every place it writes content; none of it may be left, the text around it
// stays, and JSON content stays valid JSON.
func TestCoverageLeavesNoPersonalData(t *testing.T) {
	pii := []string{"jane.doe@example.com", "4111 1111 1111 1111", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
		"+44 20 7946 0958", "DE89 3704 0044 0532 0130 00", "abcdefgh12345678"}
	for _, tc := range goldenCases {
		if !strings.HasPrefix(tc.name, "coverage_") {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			in := golden.ReadTraces(t, filepath.Join("testdata", "golden", tc.name+".input.json"))
			before := ptrace.NewTraces()
			in.CopyTo(before)
			out := string(tracesJSON(t, runProcessor(t, tc.cfg(), in)))
			for _, p := range pii {
				assert.NotContains(t, out, p)
			}
			for _, kept := range []string{"Please refund card", "to file the refund for", "invalid card"} {
				if strings.Contains(string(tracesJSON(t, before)), kept) {
					assert.Contains(t, out, kept)
				}
			}
			outSpans := runProcessor(t, tc.cfg(), before).ResourceSpans().At(0).ScopeSpans().At(0).Spans()
			for k, v := range before.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().All() {
				if v.Type() == pcommon.ValueTypeStr && json.Valid([]byte(v.Str())) && strings.ContainsAny(v.Str(), "{[") {
					got, _ := outSpans.At(0).Attributes().Get(k)
					assert.True(t, json.Valid([]byte(got.Str())), "%s is no longer JSON: %s", k, got.Str())
				}
			}
		})
	}
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			in := golden.ReadTraces(t, filepath.Join("testdata", "golden", tc.name+".input.json"))
			golden.CheckTraces(t, filepath.Join("testdata", "golden", tc.name+".expected.json"), runProcessor(t, tc.cfg(), in))
		})
	}
}

// Processing a batch twice gives the same result as processing it once, for every golden input.
func TestIdempotent(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			in := golden.ReadTraces(t, filepath.Join("testdata", "golden", tc.name+".input.json"))
			once := runProcessor(t, tc.cfg(), in)
			onceJSON := tracesJSON(t, once)
			twice := runProcessor(t, tc.cfg(), once)
			require.Equal(t, string(onceJSON), string(tracesJSON(t, twice)))
		})
	}
}

// newSDKSpan returns a span of the svc JS SDK v6 in a new batch: its metadata is JSON text.
func newSDKSpan(td ptrace.Traces) ptrace.Span {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(svcattr.TelemetrySDKLanguage, "nodejs")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(svcattr.SDKScopeName)
	ss.Scope().SetVersion("6.0.0")
	return ss.Spans().AppendEmpty()
}

// startObservedProcessor starts the processor with cfg, its metrics and warnings recorded.
func startObservedProcessor(t *testing.T, cfg *Config) (processor.Traces, *consumertest.TracesSink, *componenttest.Telemetry, *observer.ObservedLogs) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := metadatatest.NewSettings(tel)
	core, logs := observer.New(zap.WarnLevel)
	set.Logger = zap.New(core)
	sink := new(consumertest.TracesSink)
	p, err := NewFactory().CreateTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	return p, sink, tel, logs
}

func TestMetricsAndDropWarning(t *testing.T) {
	p, sink, tel, logs := startObservedProcessor(t, maskingTestConfig())

	td := ptrace.NewTraces()
	span := newSDKSpan(td)
	traceID := pcommon.TraceID{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c}
	span.SetTraceID(traceID)
	attrs := span.Attributes()
	attrs.PutStr("svc.observation.metadata.contact", `"jane@example.com"`)                    // masked
	attrs.PutInt("svc.observation.metadata.count", 5)                                         // encoded
	attrs.PutStr("svc.trace.metadata.huge", `"`+strings.Repeat("x", 199)+`"`)                 // dropped
	attrs.PutStr("ai.telemetry.metadata.user", "u-1")                                         // copied
	attrs.PutStr("traceloop.association.properties.mail", "a@b.io")                           // copied, both masked
	attrs.PutStr("svc.observation.input", `{"q": "what is 2+2?"}`)                            // nothing to mask
	attrs.PutStr("svc.observation.output", strings.Repeat("[", 200)+strings.Repeat("]", 200)) // JSON too deep: placeholder
	attrs.PutStr("svc.observation.metadata", `{"plan":"gold","contact2":"c@d.io"}`)           // kept as it is, masked as JSON

	require.NoError(t, p.ConsumeTraces(context.Background(), td))
	require.Len(t, sink.AllTraces(), 1)

	got := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()
	assert.Equal(t, map[string]any{
		"svc.observation.metadata.contact":      `"[EMAIL]"`,
		"svc.observation.metadata.count":        "5",
		"svc.observation.metadata.user":         `"u-1"`,
		"svc.observation.metadata.mail":         `"[EMAIL]"`,
		"svc.observation.metadata":              `{"plan":"gold","contact2":"[EMAIL]"}`,
		"ai.telemetry.metadata.user":            "u-1",
		"traceloop.association.properties.mail": "[EMAIL]",
		"svc.observation.input":                 `{"q": "what is 2+2?"}`,
		"svc.observation.output":                masking.Placeholder,
	}, got)

	metadatatest.AssertEqualProcessorSvcmetadataValuesEncoded(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorSvcmetadataValuesPromoted(t, tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorSvcmetadataValuesDroppedForLength(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorSvcmetadataValuesMasked(t, tel, []metricdata.DataPoint[int64]{{Value: 5}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorSvcmetadataValuesReplacedByPlaceholder(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())

	warnings := logs.FilterMessageSnippet("propagated metadata").All()
	require.Len(t, warnings, 1)
	fields := warnings[0].ContextMap()
	assert.Equal(t, "huge", fields["key"])
	assert.Equal(t, "5b8efff798038103d269b633813fc60c", fields["trace_id"])
	assert.Equal(t, int64(201), fields["length"])
}

// Metadata of a third-party span is the platform's old shape: nothing is encoded, nothing is
// dropped for length, and the metrics say so.
func TestThirdPartyMetadataIsNotEncodedNorLimited(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := metadatatest.NewSettings(tel)
	core, logs := observer.New(zap.WarnLevel)
	set.Logger = zap.New(core)
	sink := new(consumertest.TracesSink)
	p, err := NewFactory().CreateTraces(context.Background(), set, createDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })

	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.Attributes().PutStr("svc.observation.metadata.env", "prod")
	span.Attributes().PutInt("svc.observation.metadata.count", 5)
	span.Attributes().PutStr("svc.trace.metadata.notes", strings.Repeat("x", 199))
	span.Attributes().PutStr("ai.telemetry.metadata.user", "u-1")
	require.NoError(t, p.ConsumeTraces(context.Background(), td))

	got := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()
	assert.Equal(t, map[string]any{
		"svc.observation.metadata.env":   "prod",
		"svc.observation.metadata.count": int64(5),
		"svc.trace.metadata.notes":       strings.Repeat("x", 199),
		"svc.observation.metadata.user":  "u-1",
		"ai.telemetry.metadata.user":     "u-1",
	}, got)
	metadatatest.AssertEqualProcessorSvcmetadataValuesPromoted(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	_, err = tel.GetMetric("otelcol_processor_svcmetadata_values_encoded")
	assert.Error(t, err, "no value was encoded, so the counter has no data point")
	_, err = tel.GetMetric("otelcol_processor_svcmetadata_values_dropped_for_length")
	assert.Error(t, err, "no value was dropped, so the counter has no data point")
	assert.Empty(t, logs.All())
}

// A span that carries nothing the processor acts on passes unchanged, and so does its resource:
// the processor adds no attribute the platform does not know.
func TestSpanWithoutMetadataPassesUnchanged(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "db")
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("db.query")
	span.Attributes().PutStr("db.statement", "select * from orders where id = 4711")
	span.Attributes().PutInt("svc.other", 1)
	want := ptrace.NewTraces()
	td.CopyTo(want)

	out := runProcessor(t, maskingTestConfig(), td)
	assert.Equal(t, string(tracesJSON(t, want)), string(tracesJSON(t, out)))
}

// Masking covers every attribute, not only metadata and input/output: a third-party span's own
// attributes, its events, links and status message.
func TestMaskingCoversTheWholeSpan(t *testing.T) {
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.Attributes().PutStr("db.statement", "select jane@example.com")
	span.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
	span.Events().AppendEmpty().Attributes().PutStr("exception.message", "bad card 4111 1111 1111 1111")
	span.Links().AppendEmpty().Attributes().PutStr("note", "from jane@example.com")
	span.Status().SetMessage("failed for jane@example.com")

	out := runProcessor(t, maskingTestConfig(), td).ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, map[string]any{"db.statement": "select [EMAIL]", "gen_ai.request.model": "gpt-4o"}, out.Attributes().AsRaw())
	assert.Equal(t, map[string]any{"exception.message": "bad card [CARD]"}, out.Events().At(0).Attributes().AsRaw())
	assert.Equal(t, map[string]any{"note": "from [EMAIL]"}, out.Links().At(0).Attributes().AsRaw())
	assert.Equal(t, "failed for [EMAIL]", out.Status().Message())
}

// No resource attribute changes a span's encoding: a third-party resource that arrives with the
// svc.metadata.encoding attribute an older gateway set keeps its raw values, and the processor
// neither reads nor adds that attribute.
func TestResourceAttributeDoesNotChangeTheEncoding(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("svc.metadata.encoding", "json")
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.Attributes().PutStr("svc.observation.metadata.env", "prod")
	span.Attributes().PutInt("svc.observation.metadata.count", 5)

	out := runProcessor(t, createDefaultConfig(), td)
	assert.Equal(t, map[string]any{
		"svc.observation.metadata.env":   "prod",
		"svc.observation.metadata.count": int64(5),
	}, out.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw())
	assert.Equal(t, map[string]any{"svc.metadata.encoding": "json"}, out.ResourceSpans().At(0).Resource().Attributes().AsRaw())
}

// masking.extra_attributes is accepted (existing configurations keep working) and ignored, with
// a warning that says what to do instead.
func TestExtraAttributesDeprecationWarning(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	set := componenttest.NewNopTelemetrySettings()
	set.Logger = zap.New(core)
	cfg := maskingTestConfig()
	cfg.Masking.ExtraAttributes = []string{"input.value"}
	_, err := newMetadataProcessor(cfg, set)
	require.NoError(t, err)
	require.Equal(t, 1, logs.Len())
	assert.Contains(t, logs.All()[0].Message, "masking.extra_attributes is deprecated and ignored")
	assert.Contains(t, logs.All()[0].Message, "masking.skip_attributes")
}

// platformReadsDirectly reports the attributes the platform reads itself for the trace's user,
// session, tags, name, input and output and for metadata (README: What the platform shows): the
// processor may add beside them but must deliver them unchanged.
func platformReadsDirectly(name string) bool {
	switch name {
	case "user.id", "session.id", "svc.user.id", "svc.session.id", "gen_ai.conversation.id", "tag.tags",
		svcattr.ObservationMetadata, svcattr.TraceMetadata, "metadata":
		return true
	}
	return strings.HasPrefix(name, "svc.trace.") || strings.HasPrefix(name, "ai.telemetry.metadata.") ||
		strings.HasPrefix(name, "traceloop.association.properties.")
}

// Promotion, the trace input/output upgrade and the encoding add beside what the platform reads;
// with masking off, every attribute it reads itself reaches it with its value and type.
func TestPromotionKeepsWhatThePlatformReads(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg()
			cfg.Masking.Config = masking.Config{}
			in := golden.ReadTraces(t, filepath.Join("testdata", "golden", tc.name+".input.json"))
			before := ptrace.NewTraces()
			in.CopyTo(before)
			out := runProcessor(t, cfg, in)
			checked := 0
			for i := 0; i < before.ResourceSpans().Len(); i++ {
				for j := 0; j < before.ResourceSpans().At(i).ScopeSpans().Len(); j++ {
					spansBefore := before.ResourceSpans().At(i).ScopeSpans().At(j).Spans()
					spansAfter := out.ResourceSpans().At(i).ScopeSpans().At(j).Spans()
					for k := 0; k < spansBefore.Len(); k++ {
						after := spansAfter.At(k).Attributes()
						for name, v := range spansBefore.At(k).Attributes().All() {
							if !platformReadsDirectly(name) {
								continue
							}
							if name == "svc.trace.metadata" || strings.HasPrefix(name, svcattr.TraceMetadataPrefix) {
								continue // new-SDK encoding and the 200-character limit apply (docs/contract.md §6)
							}
							got, ok := after.Get(name)
							if assert.True(t, ok, "span %d: %s removed", k, name) {
								assert.Equal(t, v.AsRaw(), got.AsRaw(), "span %d: %s changed", k, name)
							}
							checked++
						}
					}
				}
			}
			t.Logf("%d attributes the platform reads checked", checked)
		})
	}
}

// A Vercel AI SDK span's user, session and tags reach the platform under their own names (it
// reads them there for the trace); the rest of its telemetry metadata is copied beside the
// originals, and the trace keys are not copied into observation metadata.
func TestVercelAIUserSessionTagsReachThePlatform(t *testing.T) {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ss.Scope().SetName("ai")
	span := ss.Spans().AppendEmpty()
	span.SetName("ai.generateText.doGenerate")
	a := span.Attributes()
	a.PutStr("ai.telemetry.metadata.userId", "user-7")
	a.PutStr("ai.telemetry.metadata.sessionId", "sess-9")
	tags := a.PutEmptySlice("ai.telemetry.metadata.tags")
	tags.AppendEmpty().SetStr("beta")
	tags.AppendEmpty().SetStr("eu")
	a.PutStr("ai.telemetry.metadata.response_format", "json")
	a.PutStr("ai.telemetry.functionId", "answer")
	out := runProcessor(t, createDefaultConfig(), td).ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()
	assert.Equal(t, map[string]any{
		"ai.telemetry.metadata.userId":             "user-7",
		"ai.telemetry.metadata.sessionId":          "sess-9",
		"ai.telemetry.metadata.tags":               []any{"beta", "eu"},
		"ai.telemetry.metadata.response_format":    "json",
		"svc.observation.metadata.response_format": "json",
		"ai.telemetry.functionId":                  "answer",
	}, out)
}

// A bare svc.trace.metadata object on a new-SDK span holds propagated values too: the limit
// applies to each member, the others stay, with the per-key attribute's warning and counter.
func TestBareTraceMetadataLimitPerMember(t *testing.T) {
	long := strings.Repeat("z", 199) // JSON text of 201 characters
	for _, tt := range []struct {
		name string
		put  func(pcommon.Map)
		want any
	}{
		{"JSON object", func(m pcommon.Map) {
			m.PutStr("svc.trace.metadata", `{"tenant": "acme", "notes": "`+long+`", "tier": 2}`)
		}, `{"tenant":"acme","tier":2}`},
		{"OTLP map", func(m pcommon.Map) {
			blob := m.PutEmptyMap("svc.trace.metadata")
			blob.PutStr("tenant", "acme")
			blob.PutStr("notes", long)
			blob.PutInt("tier", 2)
		}, map[string]any{"tenant": "acme", "tier": int64(2)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, sink, tel, logs := startObservedProcessor(t, createDefaultConfig())
			td := ptrace.NewTraces()
			tt.put(newSDKSpan(td).Attributes())
			require.NoError(t, p.ConsumeTraces(context.Background(), td))

			got, ok := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().Get("svc.trace.metadata")
			require.True(t, ok)
			assert.Equal(t, tt.want, got.AsRaw())
			metadatatest.AssertEqualProcessorSvcmetadataValuesDroppedForLength(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
			warnings := logs.FilterMessageSnippet("propagated metadata").All()
			require.Len(t, warnings, 1)
			assert.Equal(t, "notes", warnings[0].ContextMap()["key"])
			assert.Equal(t, int64(201), warnings[0].ContextMap()["length"])
		})
	}
}
