package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// startOutcome applies the sampling extension's outcome section, if it has one: the trace memory
// holds the kept spans of undecided traces and decides them (docs/outcome-sampling.md); the
// filter's own sampler then keeps every trace. Before any span, and before recovery re-admits the
// journal's held spans (they wait for their decision again).
func (p *spanFilterProcessor) startOutcome(host component.Host) error {
	o, err := sampling.OutcomeFromExtensions(host.GetExtensions(), *p.cfg.Sampling)
	if err != nil || o == nil {
		return err
	}
	maxHeld, limit := o.Config().MaxHeldMiB, p.cfg.TraceIntegrity.MemoryLimitMiB
	if maxHeld > limit {
		return fmt.Errorf("svcspanfilter: the outcome section of %s holds up to max_held_mib %d MiB, more than "+
			"trace_integrity.memory_limit_mib %d: raise memory_limit_mib or lower max_held_mib", *p.cfg.Sampling, maxHeld, limit)
	}
	p.mem.SetOutcome(o, int64(maxHeld)<<20)
	p.filter.sampler = sampling.NewRatio(1)
	p.filter.outcome = true
	return nil
}

// decidedOpt is the attribute set of a trace decision (a rule's name is the reason: few values).
func decidedOpt(d tracememory.Decided) metric.AddOption {
	decision := "dropped"
	if d.Keep {
		decision = "kept"
	}
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("decision", decision), attribute.String("reason", d.Reason)))
}
