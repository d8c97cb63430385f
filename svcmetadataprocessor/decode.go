package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/jsontext"
)

// decodeJSONValue writes the JSON text src into dst as the raw OTLP value it stands for, for
// spans whose metadata the platform stores as it arrives (a member of a JSON object string
// promoted on a third-party span):
//
//	"prod"        -> Str prod
//	5, -3         -> Int (a number without fraction or exponent that fits in 64 bits)
//	2.5, 1e3, 1.0 -> Double
//	true          -> Bool
//	{"a":1}       -> Map, members in document order
//	[1,"x"]       -> Slice
//	null          -> Empty
//
// It fails on text that is not one JSON value or is nested deeper than jsontext.MaxDepth.
func decodeJSONValue(src string, dst pcommon.Value) error {
	dec := json.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	if err := decodeJSONInto(dec, dst, 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err == nil {
		return jsontext.ErrSyntax // more than one value
	}
	return nil
}

var errNotAValue = errors.New("JSON delimiter where a value belongs")

func decodeJSONInto(dec *json.Decoder, dst pcommon.Value, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return jsontext.ErrSyntax
	}
	switch t := tok.(type) {
	case string:
		dst.SetStr(t)
	case bool:
		dst.SetBool(t)
	case nil:
		// dst stays (or becomes) Empty.
		pcommon.NewValueEmpty().CopyTo(dst)
	case json.Number:
		if i, err := strconv.ParseInt(t.String(), 10, 64); err == nil {
			dst.SetInt(i)
			return nil
		}
		f, err := strconv.ParseFloat(t.String(), 64)
		if err != nil {
			return jsontext.ErrSyntax
		}
		dst.SetDouble(f)
	case json.Delim:
		if depth >= jsontext.MaxDepth {
			return jsontext.ErrTooDeep
		}
		switch t {
		case '{':
			m := dst.SetEmptyMap()
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return jsontext.ErrSyntax
				}
				key, _ := keyTok.(string)
				if err := decodeJSONInto(dec, m.PutEmpty(key), depth+1); err != nil {
					return err
				}
			}
		case '[':
			s := dst.SetEmptySlice()
			for dec.More() {
				if err := decodeJSONInto(dec, s.AppendEmpty(), depth+1); err != nil {
					return err
				}
			}
		default:
			return errNotAValue
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return jsontext.ErrSyntax
		}
	}
	return nil
}
