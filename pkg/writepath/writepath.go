// Package writepath is the one reading of which write path of the svc platform a span may take
// (docs/contract.md §17). The platform writes each span request either directly (visible at once)
// or staged (through a staging table and a batch job: minutes late on the hosted platform). A
// request carrying `x-svc-ingestion-version: 4` is always written directly, so a gateway may set it
// only on requests whose every span a direct export would have had written directly, or whose
// users lose nothing by it:
//
//   - Direct: spans of the svc SDKs' current majors (JS/TS >= 5, Python >= 4: their own exports
//     are direct by their SDK headers) and of every other instrumentation (direct for non-SDK
//     traffic on the hosted platform, and nothing of what they show depends on the path).
//   - Staged: spans of the svc SDKs' older majors, and svc spans whose major cannot be told. The
//     platform keeps older majors on the staged path on purpose: their trace-level fields appear
//     on a synthetic root observation that only that path makes. They must not be moved.
//
// The spans are told apart as the platform tells them: the SDK headers of the client's request
// when they are known (they decided the direct export), else the instrumentation scope (a name
// containing `svc` in any case, as the platform's worker lower-cases the name before it looks),
// the scope version (the svc SDKs' scope version is the SDK version) and the resource's
// `telemetry.sdk.language`.
package writepath // import "github.com/svc/svc-collector/pkg/writepath"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Class is the write path a span may take.
type Class uint8

const (
	// Direct spans may go in a request carrying `x-svc-ingestion-version: 4`.
	Direct Class = iota + 1
	// Staged spans go in requests without it, where the platform's own rules keep them staged.
	Staged
)

func (c Class) String() string {
	switch c {
	case Direct:
		return "direct"
	case Staged:
		return "staged"
	}
	return "unknown"
}

// Headers the platform reads to choose the path (it also accepts them with `_` for `-`).
const (
	HeaderIngestionVersion = "x-svc-ingestion-version"
	HeaderSDKName          = "x-svc-sdk-name"
	HeaderSDKVersion       = "x-svc-sdk-version"
	// DirectIngestionVersion is the x-svc-ingestion-version that makes the platform write a
	// request directly (the highest it accepts: a larger value is refused with 400).
	DirectIngestionVersion = "4"
)

// SDK names of the x-svc-sdk-name header and values of telemetry.sdk.language.
const (
	sdkPython     = "python"
	sdkJavaScript = "javascript"
)

// First current majors: the platform writes an SDK's own export directly from these versions on.
const (
	pythonCurrentMajor = 4
	jsCurrentMajor     = 5
	// anyCurrentMajor is the first major current in every language: a svc scope of an unknown
	// language is Direct from here on (4.x is current in Python but old in JS: Staged).
	anyCurrentMajor = max(pythonCurrentMajor, jsCurrentMajor)
)

// Client is what the SDK headers of one client request say (the zero value: no headers known).
type Client struct {
	class   Class
	decided bool
}

// FromHeaders reads the headers a client sent with its request (empty when not sent or not known).
// They decide the class of every span of the request when the platform's rule on them does:
// `x-svc-ingestion-version` >= 4, or `x-svc-sdk-name` python / javascript (Direct from version
// 4.0.0 / 5.0.0, Staged below or when the version cannot be read). Any other SDK name (none,
// `unknown`, a gateway's own) decides nothing: the spans are told apart by their scopes.
func FromHeaders(sdkName, sdkVersion, ingestionVersion string) Client {
	if v, ok := atoi(strings.TrimSpace(ingestionVersion)); ok && v >= 4 {
		return Client{class: Direct, decided: true}
	}
	var current int
	switch sdkName {
	case sdkPython:
		current = pythonCurrentMajor
	case sdkJavaScript:
		current = jsCurrentMajor
	default:
		return Client{}
	}
	if major, ok := Major(sdkVersion); ok && major >= current {
		return Client{class: Direct, decided: true}
	}
	return Client{class: Staged, decided: true}
}

// Decided reports whether the headers decide the class of every span of the request, and which.
func (c Client) Decided() (Class, bool) { return c.class, c.decided }

// Classify returns the class of the spans of one scope of one resource of the client's request.
func (c Client) Classify(resource pcommon.Resource, scope pcommon.InstrumentationScope) Class {
	if c.decided {
		return c.class
	}
	name := scope.Name()
	if !IsSvcScope(name) {
		return Direct
	}
	language := ""
	if v, ok := resource.Attributes().Get(telemetrySDKLanguage); ok && v.Type() == pcommon.ValueTypeStr {
		language = v.Str()
	}
	return ScopeClass(language, name, scope.Version())
}

const telemetrySDKLanguage = "telemetry.sdk.language"

// IsSvcScope reports whether the platform counts a scope as a svc SDK's: its name contains `svc`
// in any case (the platform lower-cases it first). It allocates nothing.
func IsSvcScope(name string) bool {
	for i := 0; i+3 <= len(name); i++ {
		if name[i]|0x20 == 's' && name[i+1]|0x20 == 'v' && name[i+2]|0x20 == 'c' {
			return true
		}
	}
	return false
}

// ScopeClass is the class of spans of scope name and version under a resource whose
// telemetry.sdk.language is language (empty when absent), when no client header decides.
// Languages (case-insensitive): python; js, javascript, nodejs, webjs for JS/TS (the platform's
// scope rule names js and javascript; OpenTelemetry's JS SDKs set nodejs and webjs). Any other
// language: Direct only from a major that is current in both (5), since 4.x may be an old JS SDK.
func ScopeClass(language, name, version string) Class {
	if !IsSvcScope(name) {
		return Direct
	}
	major, ok := Major(version)
	if !ok {
		return Staged
	}
	current := anyCurrentMajor
	switch {
	case strings.EqualFold(language, sdkPython):
		current = pythonCurrentMajor
	case isJS(language):
		current = jsCurrentMajor
	}
	if major >= current {
		return Direct
	}
	return Staged
}

func isJS(language string) bool {
	for _, js := range [...]string{"js", sdkJavaScript, "nodejs", "webjs"} {
		if strings.EqualFold(language, js) {
			return true
		}
	}
	return false
}

// Major returns the major of a version as the platform compares versions (semver, a pre-release
// or build suffix stripped: `6.0.0-rc.1` is 6; Python's `4.0.0b1` is 4). A leading `v` is
// allowed. Since every threshold is a major's first release (x.0.0), the major decides. ok is
// false when the version does not start with a number.
func Major(version string) (int, bool) {
	version = strings.TrimSpace(version)
	if len(version) > 0 && (version[0] == 'v' || version[0] == 'V') {
		version = version[1:]
	}
	end := 0
	for end < len(version) && version[end] >= '0' && version[end] <= '9' {
		end++
	}
	if end == 0 || (end < len(version) && version[end] != '.' && version[end] != '-' && version[end] != '+' && !isLetter(version[end])) {
		return 0, false
	}
	return atoi(version[:end])
}

func isLetter(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') }

// atoi reads a non-negative decimal of at most 9 digits (a larger one is no version anyone sends).
func atoi(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
