package genaicontent

import (
	"encoding/json"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// Attribute names of the current GenAI semantic conventions that the join reads and writes.
const (
	AttrInputMessages      = "gen_ai.input.messages"
	AttrOutputMessages     = "gen_ai.output.messages"
	AttrSystemInstructions = "gen_ai.system_instructions"
	AttrProviderName       = "gen_ai.provider.name"
	// AttrSystem is the provider attribute of the older conventions (deprecated by gen_ai.provider.name).
	AttrSystem = "gen_ai.system"
)

// Content gathers the content records of one span, whatever order they arrive in. The zero value is
// ready to use. It is not safe for concurrent use: the trace memory guards it with its shard lock.
type Content struct {
	provider string
	// arrivals numbers the records in the order they were added (the tie-break of equal timestamps).
	arrivals int
	records  int
	bytes    int

	// Older per-message events.
	inputs  []inputRecord
	choices []choiceRecord

	// Newest form: gen_ai.client.inference.operation.details, usually twice per call (input at the
	// start, output at the end); a later record replaces what an earlier one carried.
	input, output, system             any
	hasInput, hasOutput, hasSystemIns bool
}

type inputRecord struct {
	at      pcommon.Timestamp
	arrival int
	msg     message
}

type choiceRecord struct {
	index   int64
	arrival int
	msg     message
}

// Add takes one log record. It returns false, and changes nothing, when lr is not a content event.
func (c *Content) Add(lr plog.LogRecord) bool {
	kind, ok := IsContentRecord(lr)
	if !ok {
		return false
	}
	c.arrivals++
	c.records++
	c.bytes += recordSize(lr)
	if p := provider(lr.Attributes()); p != "" {
		c.provider = p
	}
	body := lr.Body().AsRaw()
	at := lr.Timestamp()
	if at == 0 {
		at = lr.ObservedTimestamp()
	}
	switch kind {
	case KindSystemMessage:
		c.addInput(at, message{Role: "system", Parts: textParts(field(body, "content"))})
	case KindUserMessage:
		c.addInput(at, message{Role: "user", Parts: textParts(field(body, "content"))})
	case KindAssistantMessage:
		c.addInput(at, message{Role: "assistant", Parts: assistantParts(body)})
	case KindToolMessage:
		c.addInput(at, message{Role: "tool", Parts: toolResponseParts(body)})
	case KindChoice:
		c.addChoice(body)
	case KindOperationDetails:
		c.addDetails(lr.Attributes(), body)
	}
	return true
}

func (c *Content) addInput(at pcommon.Timestamp, msg message) {
	c.inputs = append(c.inputs, inputRecord{at: at, arrival: c.arrivals, msg: msg})
}

func (c *Content) addChoice(body any) {
	index, _ := asInt(field(body, "index"))
	msg := field(body, "message")
	role, _ := field(msg, "role").(string)
	if role == "" {
		role = "assistant"
	}
	finish, _ := field(body, "finish_reason").(string)
	c.putChoice(choiceRecord{index: index, arrival: c.arrivals, msg: message{Role: role, Parts: assistantParts(msg), FinishReason: finish}})
}

// putChoice keeps one choice per index: a record sent again (a client's retry) replaces the earlier
// copy.
func (c *Content) putChoice(rec choiceRecord) {
	for i := range c.choices {
		if c.choices[i].index == rec.index {
			c.choices[i] = rec
			return
		}
	}
	c.choices = append(c.choices, rec)
}

// addDetails copies the messages of the newest event form. They are attributes, as structured OTLP
// values or as JSON text; instrumentations that put them in the body only (early Responses API
// support of @opentelemetry/instrumentation-openai) are read from there: a body holding the attribute
// names as keys, or a bare message array, which is output when its messages carry a finish_reason.
func (c *Content) addDetails(attrs pcommon.Map, body any) {
	found := false
	if v, ok := attrs.Get(AttrInputMessages); ok {
		c.input, c.hasInput, found = decodeValue(v.AsRaw()), true, true
	}
	if v, ok := attrs.Get(AttrOutputMessages); ok {
		c.output, c.hasOutput, found = decodeValue(v.AsRaw()), true, true
	}
	if v, ok := attrs.Get(AttrSystemInstructions); ok {
		c.system, c.hasSystemIns, found = decodeValue(v.AsRaw()), true, true
	}
	if found {
		return
	}
	switch b := body.(type) {
	case map[string]any:
		if v, ok := b[AttrInputMessages]; ok {
			c.input, c.hasInput = decodeValue(v), true
		}
		if v, ok := b[AttrOutputMessages]; ok {
			c.output, c.hasOutput = decodeValue(v), true
		}
		if v, ok := b[AttrSystemInstructions]; ok {
			c.system, c.hasSystemIns = decodeValue(v), true
		}
	case []any:
		if len(b) == 0 {
			return
		}
		if slices.ContainsFunc(b, func(m any) bool { return field(m, "finish_reason") != nil }) {
			c.output, c.hasOutput = b, true
		} else {
			c.input, c.hasInput = b, true
		}
	}
}

// HasInput reports whether input messages arrived.
func (c *Content) HasInput() bool { return c != nil && (len(c.inputs) > 0 || c.hasInput) }

// HasOutput reports whether output messages arrived: the content of a finished call is complete, so
// a span waiting for it can go.
func (c *Content) HasOutput() bool { return c != nil && (len(c.choices) > 0 || c.hasOutput) }

// HasSystemInstructions reports whether system instructions arrived.
func (c *Content) HasSystemInstructions() bool { return c != nil && c.hasSystemIns }

// Empty reports whether no content record was added.
func (c *Content) Empty() bool { return c == nil || c.records == 0 }

// Records is the number of content records added.
func (c *Content) Records() int {
	if c == nil {
		return 0
	}
	return c.records
}

// Bytes estimates the memory the added records hold (for the trace memory's byte budget).
func (c *Content) Bytes() int {
	if c == nil {
		return 0
	}
	return c.bytes
}

// Provider is the provider the records name (gen_ai.provider.name, or gen_ai.system of the older
// events), "" when none does.
func (c *Content) Provider() string {
	if c == nil {
		return ""
	}
	return c.provider
}

func provider(attrs pcommon.Map) string {
	if v, ok := attrs.Get(AttrProviderName); ok && v.Str() != "" {
		return v.Str()
	}
	if v, ok := attrs.Get(AttrSystem); ok {
		return v.Str()
	}
	return ""
}

// inputMessages are the input messages in the structure of the current conventions: copied from the
// newest event form, else converted from the per-message events ordered by timestamp, then arrival.
func (c *Content) inputMessages() (any, bool) {
	if c.hasInput {
		return c.input, true
	}
	if len(c.inputs) == 0 {
		return nil, false
	}
	recs := slices.Clone(c.inputs)
	slices.SortStableFunc(recs, func(a, b inputRecord) int {
		if a.at != b.at {
			return cmpTimestamp(a.at, b.at)
		}
		return a.arrival - b.arrival
	})
	return withParts(recs, func(r inputRecord) message { return r.msg })
}

// outputMessages: copied from the newest event form, else the choices ordered by index.
func (c *Content) outputMessages() (any, bool) {
	if c.hasOutput {
		return c.output, true
	}
	if len(c.choices) == 0 {
		return nil, false
	}
	recs := slices.Clone(c.choices)
	slices.SortStableFunc(recs, func(a, b choiceRecord) int {
		switch {
		case a.index < b.index:
			return -1
		case a.index > b.index:
			return 1
		}
		return a.arrival - b.arrival
	})
	return withParts(recs, func(r choiceRecord) message { return r.msg })
}

// withParts lists the messages that hold something: with content capture off the instrumentations
// still send the events, with empty bodies, and an empty message list shows nothing on the platform.
func withParts[R any](recs []R, msg func(R) message) (any, bool) {
	msgs := make([]message, 0, len(recs))
	for _, r := range recs {
		if m := msg(r); len(m.Parts) > 0 {
			msgs = append(msgs, m)
		}
	}
	return msgs, len(msgs) > 0
}

func cmpTimestamp(a, b pcommon.Timestamp) int {
	if a < b {
		return -1
	}
	return 1
}

// decodeValue turns JSON text into its value; any other value (structured OTLP, or a string that is
// not JSON) is kept as it is.
func decodeValue(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	var decoded any
	if json.Unmarshal([]byte(s), &decoded) == nil {
		return decoded
	}
	return s
}

// recordSize estimates what a record holds in memory: its body and attribute values.
func recordSize(lr plog.LogRecord) int {
	size := 64 + valueSize(lr.Body())
	lr.Attributes().Range(func(k string, v pcommon.Value) bool {
		size += len(k) + valueSize(v)
		return true
	})
	return size
}

func valueSize(v pcommon.Value) int {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return 16 + len(v.Str())
	case pcommon.ValueTypeBytes:
		return 16 + v.Bytes().Len()
	case pcommon.ValueTypeMap:
		size := 16
		v.Map().Range(func(k string, e pcommon.Value) bool {
			size += len(k) + valueSize(e)
			return true
		})
		return size
	case pcommon.ValueTypeSlice:
		size := 16
		for i := 0; i < v.Slice().Len(); i++ {
			size += valueSize(v.Slice().At(i))
		}
		return size
	}
	return 16
}

// Merge adds what o gathered to c, as if o's records had been added to c after c's own (the trace
// memory keeps one Content per span per logs call and merges them when the span is joined). o is
// not changed.
func (c *Content) Merge(o *Content) {
	if o.Empty() {
		return
	}
	base := c.arrivals
	c.arrivals += o.arrivals
	c.records += o.records
	c.bytes += o.bytes
	if o.provider != "" {
		c.provider = o.provider
	}
	for _, r := range o.inputs {
		r.arrival += base
		c.inputs = append(c.inputs, r)
	}
	for _, r := range o.choices {
		r.arrival += base
		c.putChoice(r)
	}
	if o.hasInput {
		c.input, c.hasInput = o.input, true
	}
	if o.hasOutput {
		c.output, c.hasOutput = o.output, true
	}
	if o.hasSystemIns {
		c.system, c.hasSystemIns = o.system, true
	}
}
