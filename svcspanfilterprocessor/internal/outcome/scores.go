package outcome // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Scores follow their trace (docs/outcome-sampling.md): a score record of an undecided trace is held
// in its state (never evicted: the logs side pushes back when the memory is full) and observed (a
// score rule can keep the trace) until the decision releases or drops it.

const scoreCost = 128 // what a held score record counts beside its size

// heldScore is a score record waiting for its trace's decision.
type heldScore struct {
	record plog.LogRecord
	origin *logOrigin
	ref    gate.Ref
	bytes  int64
}

// logOrigin is where a held score record goes on: its request, resource, scope and logs pipeline.
type logOrigin struct {
	request          *client.Info
	sink             any
	resource         pcommon.Resource
	scope            pcommon.InstrumentationScope
	resURL, scopeURL string
}

// ScoreDelivery is released score records of one request and sink, for one ConsumeLogs call of
// that sink's next consumer, in the budget until ScoresDelivered (also when given up).
type ScoreDelivery struct {
	Info    client.Info
	Sink    any // the sink that held them; nil after a restart (any sink delivers them)
	Logs    plog.Logs
	Records int
	bytes   int64
	refs    map[gate.Ref]int
	// Panics: the attempts the next consumer panicked on; the processor retries no sooner than
	// RetryAt, and gives up after a bound.
	Panics  int
	RetryAt time.Time
}

// IsHeldScore reports whether lr is a score record that follows its trace: a complete score record
// of a trace (pkg/scorerecord: svc.score with an id, as the svcscore and svcevaluator connectors write).
func IsHeldScore(lr plog.LogRecord) bool {
	if lr.TraceID().IsEmpty() || scorerecord.LogRecordEventName(lr) != scorerecord.EventName {
		return false
	}
	_, ok := lr.Attributes().Get(scorerecord.AttrID)
	return ok
}

// ScoreHold is a logs call's score records planned and written ahead (the trace memory's plan, write
// ahead, apply): Apply takes them, Cancel gives the call up before anything of it was applied.
type ScoreHold struct {
	s       *Sampler
	info    *client.Info
	sink    any
	now     time.Time
	planned []bool // per score record of ld, in order: written ahead (its trace was undecided)
	ref     gate.Ref
}

// HoldScores plans the score records of ld and writes ahead those it may hold; nil when none follows
// its trace. Apply then takes them, the rest left in ld: of a trace decided kept they stay, of one
// decided dropped they are removed, of an undecided trace they are held (queued for sink once
// released, TakeReadyScores). When the memory has no room (ErrContentOverloaded) or the write fails,
// nothing is written.
func (s *Sampler) HoldScores(info client.Info, sink any, ld plog.Logs) (*ScoreHold, error) {
	h := &ScoreHold{s: s, info: &info, sink: sink, now: s.Now()}
	var copies plog.Logs // of the records of undecided traces, written ahead (the others need no room)
	var dest plog.LogRecordSlice
	var from plog.ScopeLogs
	var size int64
	eachScore(ld, func(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord) bool {
		undecided := s.Memory.Pending(lr.TraceID())
		if h.planned = append(h.planned, undecided); !undecided {
			return false
		}
		if copies == (plog.Logs{}) {
			copies = plog.NewLogs()
		}
		if sl != from {
			dest, from = appendScope(copies, rl.Resource(), rl.SchemaUrl(), sl.Scope(), sl.SchemaUrl()), sl
		}
		lr.CopyTo(dest.AppendEmpty())
		size += s.scoreSize(lr)
		return false
	})
	if len(h.planned) == 0 {
		return nil, nil
	}
	var id uint64
	if size > 0 {
		if err := s.Memory.Room(size); err != nil {
			return nil, err
		}
		if s.journaled {
			payload, err := (&plog.ProtoMarshaler{}).MarshalLogs(copies)
			if err == nil {
				id, err = s.Journal.Append(context.Background(), KindScores, h.now, journal.Metadata(info), payload)
			}
			if err != nil {
				return nil, fmt.Errorf("svcspanfilter: recording held score records: %w", err)
			}
		}
	}
	h.ref = s.Memory.NewRef(id, 1) // the guard: the record goes when its last held record is handed on
	return h, nil
}

// Apply takes the score records of ld as planned (HoldScores) and returns how many it held and dropped.
func (h *ScoreHold) Apply(ld plog.Logs) (held, dropped int) {
	held, dropped = h.s.applyScores(h.info, h.sink, ld, h.now, h.ref, h.planned)
	h.ref.Done(1)
	h.s.Memory.Enforce()
	return held, dropped
}

// Cancel gives up a hold not applied: its record is removed (should the remove fail, a restart
// delivers its records: one score each on the platform, by their id).
func (h *ScoreHold) Cancel() {
	if h != nil {
		h.ref.Done(1)
	}
}

// applyScores holds and observes the score records of ld of undecided traces (written ahead, or
// recovered: planned nil), removes those of traces decided dropped and leaves the rest in ld.
func (s *Sampler) applyScores(info *client.Info, sink any, ld plog.Logs, now time.Time, ref gate.Ref,
	planned []bool) (held, dropped int) {
	type scoreAt struct {
		rl plog.ResourceLogs
		sl plog.ScopeLogs
		lr plog.LogRecord
	}
	var ids []pcommon.TraceID
	var at []scoreAt
	eachScore(ld, func(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord) bool {
		ids, at = append(ids, lr.TraceID()), append(at, scoreAt{rl, sl, lr})
		return false
	})
	remove := make([]bool, len(at))
	var origin *logOrigin // of scope from, made for its first record held, with copies (ld goes on)
	var from plog.ScopeLogs
	s.Memory.Gated(ids, now, func(i int, tr gate.Trace) {
		a := at[i]
		if tr.Status() == gate.Pending {
			st := s.state(tr)
			s.Outcome.ObserveScore(&st.obs, a.lr)
			st.started(now)
			if planned == nil || planned[i] {
				if a.sl != from {
					origin, from = newLogOrigin(info, sink, a.rl, a.sl), a.sl
				}
				s.holdScore(tr, st, &heldScore{record: plog.NewLogRecord(), origin: origin, ref: ref,
					bytes: s.scoreSize(a.lr)}, a.lr)
				held, remove[i] = held+1, true
				if _, matched := s.Outcome.Matched(&st.obs); matched {
					s.decide(tr, st, now, false)
				}
				return
			}
			s.decide(tr, st, now, false) // not written ahead (its trace forgotten since the plan): at once
		}
		if tr.Status() == gate.Shut {
			dropped, remove[i] = dropped+1, true
		}
	})
	n := 0
	eachScore(ld, func(plog.ResourceLogs, plog.ScopeLogs, plog.LogRecord) bool { n++; return remove[n-1] })
	if dropped > 0 {
		s.observe(&Stats{ScoresDropped: int64(dropped)})
	}
	return held, dropped
}

func newLogOrigin(info *client.Info, sink any, rl plog.ResourceLogs, sl plog.ScopeLogs) *logOrigin {
	o := &logOrigin{request: info, sink: sink, resURL: rl.SchemaUrl(), scopeURL: sl.SchemaUrl(),
		resource: pcommon.NewResource(), scope: pcommon.NewInstrumentationScope()}
	rl.Resource().CopyTo(o.resource)
	sl.Scope().CopyTo(o.scope)
	return o
}

// holdScore holds hs, a copy of lr, in st: in the budget and behind the gate, under its record.
func (s *Sampler) holdScore(tr gate.Trace, st *traceState, hs *heldScore, lr plog.LogRecord) {
	lr.CopyTo(hs.record)
	st.scores = append(st.scores, hs)
	tr.Hold(hs.bytes)
	hs.ref.Hold(1)
}

// eachScore runs f on the score records of ld that follow their trace, removing those it says to.
func eachScore(ld plog.Logs, f func(plog.ResourceLogs, plog.ScopeLogs, plog.LogRecord) (remove bool)) {
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool { return IsHeldScore(lr) && f(rl, sl, lr) })
		}
	}
}

func (s *Sampler) scoreSize(lr plog.LogRecord) int64 {
	return s.Memory.SizeOf(lr.Attributes()) + scoreCost
}

// groupScores builds one delivery per request, records under copies of their resource and scope.
func (s *Sampler) groupScores(scores []*heldScore) []*ScoreDelivery {
	if len(scores) == 0 {
		return nil
	}
	var out []*ScoreDelivery
	byRequest := map[*client.Info]*ScoreDelivery{} // a request came through one sink
	scopes := map[*logOrigin]plog.LogRecordSlice{}
	var total int64
	for _, hs := range scores {
		o := hs.origin
		d := byRequest[o.request]
		if d == nil {
			d = &ScoreDelivery{Info: *o.request, Sink: o.sink, Logs: plog.NewLogs(), refs: map[gate.Ref]int{}}
			byRequest[o.request] = d
			out = append(out, d)
		}
		records, ok := scopes[o]
		if !ok {
			records = appendScope(d.Logs, o.resource, o.resURL, o.scope, o.scopeURL)
			scopes[o] = records
		}
		hs.record.MoveTo(records.AppendEmpty())
		d.Records++
		d.bytes += hs.bytes
		d.refs[hs.ref]++
		total += hs.bytes
	}
	s.Memory.Ready(total) // once: the held-scores path adds no atomic per record
	return out
}

// appendScope appends to ld a copy of a resource and scope, and returns the scope's records.
func appendScope(ld plog.Logs, res pcommon.Resource, resURL string, scope pcommon.InstrumentationScope,
	scopeURL string) plog.LogRecordSlice {
	rl := ld.ResourceLogs().AppendEmpty()
	res.CopyTo(rl.Resource())
	rl.SetSchemaUrl(resURL)
	sl := rl.ScopeLogs().AppendEmpty()
	scope.CopyTo(sl.Scope())
	sl.SetSchemaUrl(scopeURL)
	return sl.LogRecords()
}

func (s *Sampler) queue(ds []*ScoreDelivery) {
	if len(ds) == 0 {
		return
	}
	s.readyMu.Lock()
	s.ready = append(s.ready, ds...)
	s.readyMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// ScoreWake is signalled when score deliveries are queued.
func (s *Sampler) ScoreWake() <-chan struct{} { return s.wake }

// TakeReadyScores returns the queued score deliveries of sink (and those recovered, of no sink).
func (s *Sampler) TakeReadyScores(sink any) (mine []*ScoreDelivery) {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	s.ready = slices.DeleteFunc(s.ready, func(d *ScoreDelivery) bool {
		if d.Sink == sink || d.Sink == nil {
			mine = append(mine, d)
		}
		return d.Sink == sink || d.Sink == nil
	})
	return mine
}

// ScoresDelivered reports that the sink's next consumer accepted ds (or they were given up).
func (s *Sampler) ScoresDelivered(ds ...*ScoreDelivery) {
	for _, d := range ds {
		s.Memory.Ready(-d.bytes)
		d.bytes = 0
		for r, n := range d.refs {
			r.Done(n)
		}
		d.refs = nil
	}
}

// RequeueScores puts refused score deliveries back, ahead of those queued since.
func (s *Sampler) RequeueScores(ds ...*ScoreDelivery) {
	s.readyMu.Lock()
	s.ready = append(append([]*ScoreDelivery(nil), ds...), s.ready...)
	s.readyMu.Unlock()
}

// DrainScores decides every undecided trace that holds score records (the logs side's shutdown,
// on_shutdown: release) and returns the sink's queued score deliveries.
func (s *Sampler) DrainScores(sink any) []*ScoreDelivery {
	s.Memory.ForcePending(func(tr gate.Trace) bool { st := stateOf(tr); return st != nil && len(st.scores) > 0 })
	return s.TakeReadyScores(sink)
}

// recoverScores holds again the score records of a KindScores record, observed again, with their
// original time; those of traces decided kept (KindDecided, recovered before) go on at once.
func (s *Sampler) recoverScores(rec journal.Record) error {
	ref := s.Memory.NewRef(rec.ID, 1) // the guard: an unreadable record is removed
	defer ref.Done(1)
	ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(rec.Payload)
	if err != nil {
		return err
	}
	info := client.Info{Metadata: client.NewMetadata(rec.Metadata)}
	s.applyScores(&info, nil, ld, rec.HeldAt, ref, nil)
	if n := ld.LogRecordCount(); n > 0 { // of traces decided kept: they go on under the record
		ref.Hold(n)
		s.Memory.Ready(int64(n) * scoreCost)
		s.queue([]*ScoreDelivery{{Info: info, Logs: ld, Records: n, bytes: int64(n) * scoreCost,
			refs: map[gate.Ref]int{ref: n}}})
	}
	return nil
}
