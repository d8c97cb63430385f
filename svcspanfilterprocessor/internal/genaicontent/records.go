// Package genaicontent turns the GenAI content that instrumentations send as log records (OpenTelemetry
// GenAI events) into the span attributes of the current GenAI semantic conventions
// (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`), which the svc
// platform reads as an observation's input and output. Pure functions over pdata; the span filter's
// trace memory decides when records and spans meet.
package genaicontent // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/genaicontent"

import "go.opentelemetry.io/collector/pdata/plog"

// Kind is the GenAI content event a log record carries.
type Kind uint8

// The content events. gen_ai.evaluation.result is not one of them: it becomes a score.
const (
	KindNone Kind = iota
	KindSystemMessage
	KindUserMessage
	KindAssistantMessage
	KindToolMessage
	KindChoice
	KindOperationDetails
)

// Event names of the content events.
const (
	EventSystemMessage    = "gen_ai.system.message"
	EventUserMessage      = "gen_ai.user.message"
	EventAssistantMessage = "gen_ai.assistant.message"
	EventToolMessage      = "gen_ai.tool.message"
	EventChoice           = "gen_ai.choice"
	EventOperationDetails = "gen_ai.client.inference.operation.details"
)

// attrEventName names the event on records of SDKs that predate the log record's own event name
// field (the JS logs API of @opentelemetry/instrumentation-openai sets only this attribute).
const attrEventName = "event.name"

var kindByName = map[string]Kind{
	EventSystemMessage:    KindSystemMessage,
	EventUserMessage:      KindUserMessage,
	EventAssistantMessage: KindAssistantMessage,
	EventToolMessage:      KindToolMessage,
	EventChoice:           KindChoice,
	EventOperationDetails: KindOperationDetails,
}

var nameByKind = [...]string{
	KindNone:             "none",
	KindSystemMessage:    EventSystemMessage,
	KindUserMessage:      EventUserMessage,
	KindAssistantMessage: EventAssistantMessage,
	KindToolMessage:      EventToolMessage,
	KindChoice:           EventChoice,
	KindOperationDetails: EventOperationDetails,
}

// String is the event name of the kind.
func (k Kind) String() string {
	if int(k) < len(nameByKind) {
		return nameByKind[k]
	}
	return "none"
}

// EventName is the record's event name: its EventName field or, when that is empty, its `event.name`
// attribute.
func EventName(lr plog.LogRecord) string {
	if name := lr.EventName(); name != "" {
		return name
	}
	if v, ok := lr.Attributes().Get(attrEventName); ok {
		return v.Str()
	}
	return ""
}

// IsContentRecord reports whether lr is a GenAI content event, and which.
func IsContentRecord(lr plog.LogRecord) (Kind, bool) {
	kind, ok := kindByName[EventName(lr)]
	return kind, ok
}
