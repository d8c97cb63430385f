package scorerecord

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// TestNormalizeBothPaths: a score says the same to the platform, or is refused with the same
// error, whichever path it took: a scoring event through the connector (Event.Score, Write, then
// the exporter's Read), or a score record an application sent straight to the exporter (Read).
func TestNormalizeBothPaths(t *testing.T) {
	observation := hex.EncodeToString(testSpanID[:])
	tests := []struct {
		name     string
		dataType any // nil: no svc.score.data_type attribute
		value    any
		target   any // nil: no svc.score.target attribute
		// The request both paths send, or the error both refuse with.
		wantType        string
		wantValue       any
		wantObservation string
		wantErr         error
	}{
		{name: "number, no type", value: 0.5, wantType: DataTypeNumeric, wantValue: 0.5, wantObservation: observation},
		{name: "int, no type", value: int64(3), wantType: DataTypeNumeric, wantValue: 3.0, wantObservation: observation},
		{name: "string, no type", value: "good", wantType: DataTypeCategorical, wantValue: "good", wantObservation: observation},
		{name: "lower-case numeric", dataType: "numeric", value: 0.5, wantType: DataTypeNumeric, wantValue: 0.5, wantObservation: observation},
		{name: "mixed-case categorical", dataType: " Categorical ", value: "good", wantType: DataTypeCategorical, wantValue: "good", wantObservation: observation},
		{name: "bool true, no type", value: true, wantType: DataTypeBoolean, wantValue: 1.0, wantObservation: observation},
		{name: "bool false, lower-case boolean", dataType: "boolean", value: false, wantType: DataTypeBoolean, wantValue: 0.0, wantObservation: observation},
		{name: "BOOLEAN 1", dataType: "BOOLEAN", value: int64(1), wantType: DataTypeBoolean, wantValue: 1.0, wantObservation: observation},
		{name: "bool declared NUMERIC", dataType: "NUMERIC", value: true, wantType: DataTypeNumeric, wantValue: 1.0, wantObservation: observation},
		// The platform judges whether a type fits its value (a 207 with its reason): both paths
		// send the same request.
		{name: "BOOLEAN 7, the platform's to refuse", dataType: "boolean", value: int64(7), wantType: DataTypeBoolean, wantValue: 7.0, wantObservation: observation},
		{name: "unknown type, upper-cased", dataType: "percent", value: 0.5, wantType: "PERCENT", wantValue: 0.5, wantObservation: observation},
		{name: "target observation", value: 0.5, target: "observation", wantType: DataTypeNumeric, wantValue: 0.5, wantObservation: observation},
		{name: "target trace", value: 0.5, target: "trace", wantType: DataTypeNumeric, wantValue: 0.5},
		{name: "target TRACE", value: 0.5, target: "TRACE", wantType: DataTypeNumeric, wantValue: 0.5},
		{name: "unknown target", value: 0.5, target: "session", wantErr: ErrInvalidTarget},
		{name: "non-string target", value: 0.5, target: int64(1), wantErr: ErrInvalidTarget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs := pcommon.NewMap()
			attrs.PutStr(AttrName, "quality")
			require.NoError(t, attrs.PutEmpty(AttrValue).FromRaw(tt.value))
			if tt.dataType != nil {
				require.NoError(t, attrs.PutEmpty(AttrDataType).FromRaw(tt.dataType))
			}
			if tt.target != nil {
				require.NoError(t, attrs.PutEmpty(AttrTarget).FromRaw(tt.target))
			}

			// Path 1: the connector's reading of a scoring event, then the exporter's.
			var viaEvent Request
			score, eventErr := Event{Kind: KindSvcScore, Attrs: attrs, TraceID: testTraceID, SpanID: testSpanID, Time: 1}.Score(2)
			if eventErr == nil {
				viaEvent = requestOf(score)
				require.NoError(t, viaEvent.Validate(), "the exporter refuses what the connector wrote")
			}

			// Path 2: the same attributes as a score record sent straight to the exporter.
			lr := plog.NewLogRecord()
			lr.SetEventName(EventName)
			lr.SetTraceID(testTraceID)
			lr.SetSpanID(testSpanID)
			attrs.CopyTo(lr.Attributes())
			viaRecord := Read(lr)
			recordErr := viaRecord.Validate()

			if tt.wantErr != nil {
				assert.ErrorIs(t, eventErr, tt.wantErr, "event path")
				assert.ErrorIs(t, recordErr, tt.wantErr, "record path")
				return
			}
			require.NoError(t, eventErr, "event path")
			require.NoError(t, recordErr, "record path")
			for path, req := range map[string]Request{"event": viaEvent, "record": viaRecord} {
				assert.Equal(t, tt.wantType, req.DataType, path)
				assert.Equal(t, tt.wantValue, req.Value, path)
				assert.Equal(t, tt.wantObservation, req.ObservationID, path)
				assert.Equal(t, hex.EncodeToString(testTraceID[:]), req.TraceID, path)
			}
		})
	}
}

// TestNormalizeIsStable: normalising what Normalize returned changes nothing, so the record the
// connector wrote reads back as the connector meant it.
func TestNormalizeIsStable(t *testing.T) {
	for _, in := range []struct {
		dataType string
		value    any
		target   string
	}{{"", true, ""}, {"boolean", false, "trace"}, {"", 7.5, ""}, {"categorical", "x", "observation"}, {"", int64(2), ""}} {
		v := pcommon.NewValueEmpty()
		require.NoError(t, v.FromRaw(in.value))
		first, err := Normalize(in.dataType, v, in.target)
		require.NoError(t, err)
		target := ""
		if first.TraceLevel {
			target = TargetTrace
		}
		again, err := Normalize(first.DataType, first.Value, target)
		require.NoError(t, err)
		assert.Equal(t, first.DataType, again.DataType)
		assert.Equal(t, first.Value.AsRaw(), again.Value.AsRaw())
		assert.Equal(t, first.TraceLevel, again.TraceLevel)
	}
}
