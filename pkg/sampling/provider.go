package sampling

import (
	"fmt"
)

// Provider is the svcsampling extension as the components that reference it see it: the one
// sampling decision of a collector, its rate and its memory of experiment traces, shared by every
// component that names the extension in its `sampling` setting.
type Provider interface {
	Decider() *Decider
}

// FromExtensions returns the Decider of the sampling extension id among a host's extensions
// (component.Host.GetExtensions()). The components call it at Start, when the extensions are
// known. It is generic over the map so that this package needs no collector module beyond pdata.
func FromExtensions[ID comparable, Ext any](extensions map[ID]Ext, id ID) (*Decider, error) {
	ext, ok := extensions[id]
	if !ok {
		return nil, fmt.Errorf("sampling: extension %q is not running: add it under extensions and service::extensions", fmt.Sprint(id))
	}
	p, ok := any(ext).(Provider)
	if !ok {
		return nil, fmt.Errorf("sampling: extension %q is not a sampling extension (svcsampling)", fmt.Sprint(id))
	}
	return p.Decider(), nil
}

// Shared is the decider a component uses: the sampling extension's when the component's
// `sampling` setting names one (id), else its own.
func Shared[ID comparable, Ext any](extensions map[ID]Ext, id *ID, own *Decider) (*Decider, error) {
	if id == nil {
		return own, nil
	}
	return FromExtensions(extensions, *id)
}

// ScoreDecider is the decision of a score connector (svcscore, svcevaluator): Shared, except that
// when the extension has an outcome section the connector drops no score by the rate: the scores
// follow their trace's outcome decision, which the span filter takes and applies to them.
func ScoreDecider[ID comparable, Ext any](extensions map[ID]Ext, id *ID, own *Decider) (*Decider, error) {
	d, err := Shared(extensions, id, own)
	if err != nil || id == nil {
		return d, err
	}
	o, err := OutcomeFromExtensions(extensions, *id)
	if err != nil || o == nil {
		return d, err
	}
	return NewDecider(NewRatio(1), nil), nil
}

// OutcomeProvider is the svcsampling extension's outcome sampling, for the components that decide
// on a trace's outcome (the span filter, and the score connectors whose scores follow it).
type OutcomeProvider interface {
	// Outcome is nil when the extension has no outcome section.
	Outcome() *Outcome
}

// OutcomeFromExtensions returns the Outcome of the sampling extension id among a host's
// extensions, nil when it has no outcome section (the head decision alone applies).
func OutcomeFromExtensions[ID comparable, Ext any](extensions map[ID]Ext, id ID) (*Outcome, error) {
	if _, err := FromExtensions(extensions, id); err != nil {
		return nil, err
	}
	p, ok := any(extensions[id]).(OutcomeProvider)
	if !ok {
		return nil, nil
	}
	return p.Outcome(), nil
}
