package genaicontent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/svc/svc-collector/pkg/golden"
)

// goldenWant is testdata/<case>/want.json: what Apply does to the span of span.json given the
// records of logs.json.
type goldenWant struct {
	Applied   bool `json:"applied"`
	Records   int  `json:"records"`
	HasInput  bool `json:"has_input"`
	HasOutput bool `json:"has_output"`
	// OrderIndependent cases have distinct timestamps (or are ordered by choice index), so the result
	// must not depend on the order the records arrive in.
	OrderIndependent bool `json:"order_independent"`
	// Attributes are the expected values of the content attributes; null means absent. Message
	// attributes are JSON text on the span, compared as JSON values.
	Attributes map[string]any `json:"attributes"`
}

func TestApplyGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "*", "want.json"))
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, wantPath := range dirs {
		dir := filepath.Dir(wantPath)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			raw, err := os.ReadFile(wantPath)
			require.NoError(t, err)
			var want goldenWant
			require.NoError(t, json.Unmarshal(raw, &want))
			ld := golden.ReadLogs(t, filepath.Join(dir, "logs.json"))
			records := logRecords(ld)

			orders := [][]plog.LogRecord{records}
			if want.OrderIndependent {
				orders = append(orders, reversed(records))
			}
			for _, order := range orders {
				td := golden.ReadTraces(t, filepath.Join(dir, "span.json"))
				span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
				before := pcommon.NewMap()
				span.Attributes().CopyTo(before)

				var c Content
				for _, lr := range order {
					c.Add(lr)
				}
				assert.Equal(t, want.Records, c.Records(), "content records")
				assert.Equal(t, want.HasInput, c.HasInput(), "HasInput")
				assert.Equal(t, want.HasOutput, c.HasOutput(), "HasOutput")
				assert.Equal(t, want.Applied, Apply(span, &c), "applied")

				for key, wantValue := range want.Attributes {
					got, ok := span.Attributes().Get(key)
					if wantValue == nil {
						if ok {
							t.Errorf("%s must be absent, got %s", key, got.AsString())
						}
						continue
					}
					require.True(t, ok, "%s missing", key)
					assert.Equal(t, normalize(t, wantValue), decoded(got.Str()), "%s", key)
				}
				// Nothing else on the span changes.
				span.Attributes().Range(func(k string, v pcommon.Value) bool {
					if _, listed := want.Attributes[k]; !listed {
						old, ok := before.Get(k)
						assert.True(t, ok && reflect.DeepEqual(old.AsRaw(), v.AsRaw()), "attribute %s changed", k)
					}
					return true
				})
			}
		})
	}
}

// logRecords lists the records of ld in order.
func logRecords(ld plog.Logs) []plog.LogRecord {
	var out []plog.LogRecord
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		sls := ld.ResourceLogs().At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				out = append(out, lrs.At(k))
			}
		}
	}
	return out
}

func reversed(in []plog.LogRecord) []plog.LogRecord {
	out := slices.Clone(in)
	slices.Reverse(out)
	return out
}

// decoded is JSON text as its value; other text as itself.
func decoded(s string) any {
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		return v
	}
	return s
}

func normalize(t *testing.T, v any) any {
	t.Helper()
	if s, ok := v.(string); ok {
		return s
	}
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// Merging the Contents of several logs calls gives what adding all their records to one gives, in
// every split of the records.
func TestMergeEqualsAddingAll(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "*", "logs.json"))
	require.NoError(t, err)
	for _, path := range dirs {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			records := logRecords(golden.ReadLogs(t, path))
			var all Content
			for _, lr := range records {
				all.Add(lr)
			}
			wantIn, _ := all.inputMessages()
			wantOut, _ := all.outputMessages()
			for split := 0; split <= len(records); split++ {
				var first, second Content
				for i, lr := range records {
					if i < split {
						first.Add(lr)
					} else {
						second.Add(lr)
					}
				}
				var merged Content
				merged.Merge(&first)
				merged.Merge(&second)
				gotIn, _ := merged.inputMessages()
				gotOut, _ := merged.outputMessages()
				assert.Equal(t, marshal(wantIn), marshal(gotIn), "input, split at %d", split)
				assert.Equal(t, marshal(wantOut), marshal(gotOut), "output, split at %d", split)
				assert.Equal(t, all.Records(), merged.Records())
				assert.Equal(t, all.HasOutput(), merged.HasOutput())
				assert.Equal(t, all.HasSystemInstructions(), merged.HasSystemInstructions())
			}
		})
	}
}
