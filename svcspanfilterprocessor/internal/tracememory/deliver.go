package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Delivery is released spans of one request client context, in the budget until it is Delivered
// (also when given up); Requeue puts a refused one back.
type Delivery struct {
	Info   client.Info
	Traces ptrace.Traces
	Spans  int
	bytes  int64
	refs   map[*RecordRef]int
	sized  bool // bytes were counted exactly (Requeue)
	// Panics: the attempts the next consumer panicked on; the processor retries no sooner than
	// RetryAt, and gives up after a bound.
	Panics  int
	RetryAt time.Time
}

// group builds one delivery per request, spans under copies of their own resource and scope.
func (m *Memory) group(items []*item) []*Delivery {
	if len(items) == 0 {
		return nil // the common case: nothing released, no atomic add on the shared ready bytes
	}
	var out []*Delivery
	byRequest := map[*requestOrigin]*Delivery{}
	under := newCopier()
	var total int64
	for _, it := range items {
		req := it.origin.resource.request
		d := byRequest[req]
		if d == nil {
			d = &Delivery{Info: req.info, Traces: ptrace.NewTraces(), refs: map[*RecordRef]int{}}
			byRequest[req] = d
			out = append(out, d)
		}
		it.span.MoveTo(under.spans(d.Traces, it.origin).AppendEmpty())
		d.Spans++
		d.bytes += it.bytes
		total += it.bytes
		d.refs[it.ref]++ // a nil ref (no record) is Done as a no-op
		for _, r := range it.contentRefs {
			d.refs[r]++
		}
	}
	m.readyBytes.Add(total)
	return out
}

// copier makes the copies of resources and scopes that spans are put under, each once.
type copier struct {
	resources map[*resourceOrigin]ptrace.ResourceSpans
	scopes    map[*scopeOrigin]ptrace.ScopeSpans
}

// newCopier is inlined: a caller's maps stay on its stack.
func newCopier() copier {
	return copier{map[*resourceOrigin]ptrace.ResourceSpans{}, map[*scopeOrigin]ptrace.ScopeSpans{}}
}

// spans is the span slice of o's copy in td (spans of one origin always go into one td).
func (c *copier) spans(td ptrace.Traces, o *scopeOrigin) ptrace.SpanSlice {
	ss, ok := c.scopes[o]
	if !ok {
		rs, ok := c.resources[o.resource]
		if !ok {
			rs = td.ResourceSpans().AppendEmpty()
			o.resource.resource.CopyTo(rs.Resource())
			rs.SetSchemaUrl(o.resource.schemaURL)
			c.resources[o.resource] = rs
		}
		ss = rs.ScopeSpans().AppendEmpty()
		o.scope.CopyTo(ss.Scope())
		ss.SetSchemaUrl(o.schemaURL)
		c.scopes[o] = ss
	}
	return ss.Spans()
}

// Delivered: the next consumer accepted ds, or refused them for good; they leave the budget, and
// the journal records they finish go in one write.
func (m *Memory) Delivered(ds ...*Delivery) {
	var ids []uint64
	for _, d := range ds {
		m.readyBytes.Add(-d.bytes)
		d.bytes = 0
		for r, n := range d.refs {
			if id := r.add(-n); id != 0 {
				ids = append(ids, id)
			}
		}
		d.refs = nil
	}
	m.remove(ids...)
}

// Requeue puts refused deliveries back for the releaser, ahead of those queued since, sized
// exactly: they stay in the ready bytes while refused.
func (m *Memory) Requeue(ds ...*Delivery) {
	for _, d := range ds {
		if d.sized || d.bytes == 0 {
			continue // sized, or not counted (recovered spans that resolved at once)
		}
		var exact int64
		for _, rs := range d.Traces.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					exact += itemSize(span)
				}
			}
		}
		m.readyBytes.Add(exact - d.bytes)
		d.bytes, d.sized = exact, true
	}
	m.readyMu.Lock()
	m.ready = append(append([]*Delivery(nil), ds...), m.ready...)
	m.readyMu.Unlock()
}

func queue[D any](m *Memory, q *[]D, ds []D, wake chan struct{}) {
	if len(ds) == 0 {
		return
	}
	m.readyMu.Lock()
	*q = append(*q, ds...)
	m.readyMu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// TakeReady returns the queued deliveries, oldest first; the caller reports back on each.
func (m *Memory) TakeReady() (ds []*Delivery) {
	m.readyMu.Lock()
	ds, m.ready = m.ready, nil
	m.readyMu.Unlock()
	return ds
}
