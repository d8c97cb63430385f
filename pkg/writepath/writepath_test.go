package writepath

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestClassify(t *testing.T) {
	type headers struct{ name, version, ingestion string }
	tests := []struct {
		name     string
		headers  headers
		language string // "" : no telemetry.sdk.language attribute
		scope    string
		version  string
		want     Class
	}{
		// The svc SDKs, told apart by scope version and language.
		{name: "JS 6", language: "nodejs", scope: "svc-sdk", version: "6.1.0", want: Direct},
		{name: "JS 5", language: "nodejs", scope: "svc-sdk", version: "5.0.0", want: Direct},
		{name: "JS 5 pre-release counts as 5", language: "nodejs", scope: "svc-sdk", version: "5.0.0-rc.1", want: Direct},
		{name: "JS 4.4", language: "nodejs", scope: "svc-sdk", version: "4.4.0", want: Staged},
		{name: "JS language js", language: "js", scope: "svc-sdk", version: "4.9.9", want: Staged},
		{name: "JS language javascript", language: "javascript", scope: "svc-sdk", version: "6.0.0", want: Direct},
		{name: "JS language webjs", language: "webjs", scope: "svc-sdk", version: "5.2.0", want: Direct},
		{name: "language in upper case", language: "NodeJS", scope: "svc-sdk", version: "4.0.0", want: Staged},
		{name: "Python 5", language: "python", scope: "svc-sdk", version: "5.0.1", want: Direct},
		{name: "Python 4", language: "python", scope: "svc-sdk", version: "4.0.0", want: Direct},
		{name: "Python 4 beta (PEP 440 suffix)", language: "python", scope: "svc-sdk", version: "4.0.0b1", want: Direct},
		{name: "Python 3.x", language: "python", scope: "svc-sdk", version: "3.9.2", want: Staged},
		{name: "Python 2", language: "python", scope: "svc-sdk", version: "2.60.0", want: Staged},
		{name: "no version", language: "python", scope: "svc-sdk", version: "", want: Staged},
		{name: "unreadable version", language: "nodejs", scope: "svc-sdk", version: "latest", want: Staged},
		{name: "leading v", language: "nodejs", scope: "svc-sdk", version: "v6.0.0", want: Direct},
		{name: "unknown language, 4.x: an old JS or a current Python", language: "go", scope: "svc-sdk", version: "4.2.0", want: Staged},
		{name: "no language, 4.x", scope: "svc-sdk", version: "4.2.0", want: Staged},
		{name: "unknown language, 5.x: current in both", language: "java", scope: "svc-sdk", version: "5.0.0", want: Direct},
		{name: "unknown language, 3.x", scope: "svc-sdk", version: "3.0.0", want: Staged},
		{name: "any scope containing svc counts (platform's includes)", language: "python", scope: "my-svc-tracer", version: "1.0.0", want: Staged},
		{name: "svc in any case, as the platform lower-cases the scope", language: "python", scope: "SVC-sdk", version: "1.0.0", want: Staged},
		{name: "Svc inside a name", language: "nodejs", scope: "@acme/MySvcTracer", version: "6.0.0", want: Direct},
		{name: "s-v-c apart is no svc", language: "python", scope: "s.v.c", version: "1.0.0", want: Direct},
		// Other instrumentations: Direct whatever their version.
		{name: "OpenLLMetry openai", language: "python", scope: "opentelemetry.instrumentation.openai", version: "0.40.0", want: Direct},
		{name: "Vercel AI SDK", language: "nodejs", scope: "ai", version: "", want: Direct},
		{name: "OpenInference JS", language: "nodejs", scope: "@arizeai/openinference-instrumentation-openai", version: "1.0.0", want: Direct},
		{name: "empty scope", scope: "", version: "", want: Direct},
		// The client's SDK headers, when known, decide every span of its request.
		{name: "headers python 5 override an old scope", headers: headers{"python", "5.0.0", ""}, language: "python", scope: "svc-sdk", version: "3.0.0", want: Direct},
		{name: "headers python 4 over an unversioned scope", headers: headers{"python", "4.0.0", ""}, language: "python", scope: "svc-sdk", want: Direct},
		{name: "headers python 3 make third-party spans staged", headers: headers{"python", "3.12.0", ""}, language: "python", scope: "opentelemetry.instrumentation.openai", want: Staged},
		{name: "headers javascript 5", headers: headers{"javascript", "5.0.0-beta.2", ""}, language: "nodejs", scope: "svc-sdk", version: "4.0.0", want: Direct},
		{name: "headers javascript 4 override a current scope", headers: headers{"javascript", "4.4.0", ""}, language: "nodejs", scope: "svc-sdk", version: "6.0.0", want: Staged},
		{name: "headers javascript without a version", headers: headers{"javascript", "", ""}, scope: "ai", want: Staged},
		{name: "ingestion version 4 from the client", headers: headers{"python", "3.0.0", "4"}, language: "python", scope: "svc-sdk", version: "3.0.0", want: Direct},
		{name: "ingestion version 3 decides nothing", headers: headers{"", "", "3"}, language: "python", scope: "svc-sdk", version: "3.0.0", want: Staged},
		{name: "sdk name unknown decides nothing", headers: headers{"unknown", "9.0.0", ""}, language: "python", scope: "svc-sdk", version: "3.0.0", want: Staged},
		{name: "another gateway's name decides nothing", headers: headers{"svc-otelcol", "0.5.0", ""}, scope: "ai", want: Direct},
		{name: "sdk name is case-sensitive", headers: headers{"Python", "5.0.0", ""}, language: "python", scope: "svc-sdk", version: "3.0.0", want: Staged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := pcommon.NewResource()
			if tt.language != "" {
				res.Attributes().PutStr(telemetrySDKLanguage, tt.language)
			}
			scope := pcommon.NewInstrumentationScope()
			scope.SetName(tt.scope)
			scope.SetVersion(tt.version)
			got := FromHeaders(tt.headers.name, tt.headers.version, tt.headers.ingestion).Classify(res, scope)
			assert.Equal(t, tt.want, got, "got %s", got)
		})
	}
}

func TestFromHeadersDecided(t *testing.T) {
	tests := []struct {
		name, sdk, version, ingestion string
		want                          Class
		decided                       bool
	}{
		{name: "none", decided: false},
		{name: "python 5", sdk: "python", version: "5.0.0", want: Direct, decided: true},
		{name: "python 3", sdk: "python", version: "3.0.0", want: Staged, decided: true},
		{name: "java SDK of another vendor", sdk: "java", version: "9.0.0", decided: false},
		{name: "ingestion 4", ingestion: " 4 ", want: Direct, decided: true},
		{name: "ingestion not a number", ingestion: "four", decided: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, decided := FromHeaders(tt.sdk, tt.version, tt.ingestion).Decided()
			assert.Equal(t, tt.decided, decided)
			if decided {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

func TestMajor(t *testing.T) {
	tests := []struct {
		in    string
		major int
		ok    bool
	}{
		{"6.0.0", 6, true}, {"5", 5, true}, {"4.0.0-rc.1", 4, true}, {"4.0.0+build.7", 4, true},
		{"4rc1", 4, true}, {"v5.1.0", 5, true}, {" 3.2.1 ", 3, true}, {"12.0.0", 12, true},
		{"", 0, false}, {"x", 0, false}, {"-1.0.0", 0, false}, {"4_0", 0, false}, {"9999999999.0.0", 0, false},
	}
	for _, tt := range tests {
		major, ok := Major(tt.in)
		assert.Equal(t, tt.ok, ok, "%q", tt.in)
		if tt.ok {
			assert.Equal(t, tt.major, major, "%q", tt.in)
		}
	}
}

func TestClassString(t *testing.T) {
	assert.Equal(t, "direct", Direct.String())
	assert.Equal(t, "staged", Staged.String())
	assert.Equal(t, "unknown", Class(0).String())
}

// BenchmarkClassify is the per-scope cost on the exporter's hot path: once per scope per batch.
func BenchmarkClassify(b *testing.B) {
	res := pcommon.NewResource()
	res.Attributes().PutStr("service.name", "checkout")
	res.Attributes().PutStr("telemetry.sdk.name", "opentelemetry")
	res.Attributes().PutStr(telemetrySDKLanguage, "nodejs")
	res.Attributes().PutStr("telemetry.sdk.version", "2.0.1")
	scopes := map[string][2]string{
		"svc-sdk":     {"svc-sdk", "6.1.0"},
		"third-party": {"opentelemetry.instrumentation.openai", "0.40.0"},
	}
	for name, s := range scopes {
		scope := pcommon.NewInstrumentationScope()
		scope.SetName(s[0])
		scope.SetVersion(s[1])
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			c := FromHeaders("", "", "")
			for b.Loop() {
				if c.Classify(res, scope) != Direct {
					b.Fatal("not direct")
				}
			}
		})
	}
}
