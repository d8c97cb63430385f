package svcspanfilterprocessor

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc/svc-collector/pkg/scopematch"
)

// The known scopes are the svc SDKs' list (docs/contract.md §8); this pins the table's size and shape so
// that an edit to it is deliberate.
func TestKnownScopesTable(t *testing.T) {
	assert.Len(t, knownScopes, 40)
	seen := map[string]bool{}
	for _, s := range knownScopes {
		assert.False(t, seen[s.name], "scope %q is listed twice", s.name)
		seen[s.name] = true
		assert.Empty(t, scopeProblem(s.name))
		switch s.name {
		case "ai":
			assert.Equal(t, scopematch.Exact, s.rule, "`ai` matches exactly")
		case openInferenceJSPrefix:
			assert.Equal(t, scopematch.Prefix, s.rule, "the OpenInference JS scopes match by prefix")
		default:
			assert.Equal(t, scopematch.Boundary, s.rule, "%q matches boundary-aware", s.name)
		}
	}
}

// The README's list of known scopes is the table's.
func TestReadmeListsKnownScopes(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	section := string(readme)
	start := strings.Index(section, "### Known instrumentation scopes")
	require.GreaterOrEqual(t, start, 0)
	section = section[start:]
	section = section[:strings.Index(section, "\n## ")]
	for _, s := range knownScopes {
		name := strings.TrimPrefix(s.name, openTelemetryInstrumentationPrefix)
		assert.Contains(t, section, "`"+name+"`", "README does not list the known scope %q", s.name)
	}
}
