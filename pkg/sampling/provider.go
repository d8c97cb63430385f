package sampling

import (
	"fmt"

	"go.opentelemetry.io/collector/component"
)

// Provider is the svcsampling extension as the components that reference it see it: the one
// sampling decision of a collector, its rate and its memory of experiment traces, shared by every
// component that names the extension in its `sampling` setting.
type Provider interface {
	Decider() *Decider
}

// FromHost returns the Decider of the sampling extension id among the host's extensions. The
// components call it at Start, when the extensions are known.
func FromHost(host component.Host, id component.ID) (*Decider, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("sampling: extension %q is not running: add it under extensions and service::extensions", id)
	}
	p, ok := ext.(Provider)
	if !ok {
		return nil, fmt.Errorf("sampling: extension %q is not a sampling extension (svcsampling)", id)
	}
	return p.Decider(), nil
}

// Shared is the decider a component uses: the sampling extension's when the component's
// `sampling` setting names one (id), else its own.
func Shared(host component.Host, id *component.ID, own *Decider) (*Decider, error) {
	if id == nil {
		return own, nil
	}
	return FromHost(host, *id)
}
