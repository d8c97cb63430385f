package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Scores follow their trace (outcome sampling, docs/outcome-sampling.md): a score record of an
// undecided trace is held under it (never evicted: the logs side pushes back when the memory is full)
// and observed (a score rule can keep the trace) until the decision releases or drops it.

const scoreCost = 128 // what a held score record counts beside its size

// heldScore is a score record waiting for its trace's decision.
type heldScore struct {
	record plog.LogRecord
	origin *logOrigin
	ref    *RecordRef
	bytes  int64
}

// logOrigin is where a held score record goes on: its request, resource, scope and logs pipeline.
type logOrigin struct {
	request          *requestOrigin
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
	refs    map[*RecordRef]int
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

// ScoresFollow reports whether score records follow their trace's decision (outcome sampling on).
func (m *Memory) ScoresFollow() bool { return m.cfg.Outcome != nil }

// ScoreHold is a logs call's score records planned and written ahead (doc.go: plan, write ahead,
// apply): Apply takes them, Cancel gives the call up before anything of it was applied.
type ScoreHold struct {
	m       *Memory
	req     *requestOrigin
	sink    any
	now     time.Time
	planned []bool // per score record of ld, in order: written ahead (its trace was undecided)
	ref     *RecordRef
}

// HoldScores plans the score records of ld and writes ahead those it may hold; nil when none follows
// its trace. Apply then takes them, the rest left in ld: of a trace decided kept they stay, of one
// decided dropped they are removed, of an undecided trace they are held (queued for sink once
// released, TakeReadyScores). When the memory has no room (ErrContentOverloaded) or the write fails,
// nothing is written.
func (m *Memory) HoldScores(info client.Info, sink any, ld plog.Logs) (*ScoreHold, error) {
	if m.cfg.Outcome == nil {
		return nil, nil
	}
	h := &ScoreHold{m: m, req: newRequestOrigin(info), sink: sink, now: m.cfg.Now()}
	// Plan: copies of the records of undecided traces, written ahead (the others need no room).
	var copies plog.Logs
	var dest plog.LogRecordSlice // of scope from in copies
	var from plog.ScopeLogs
	var size int64
	eachScore(ld, func(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord) bool {
		undecided := !m.known(lr.TraceID(), pcommon.SpanID{}, isDecided)
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
		size += scoreSize(lr)
		return false
	})
	if len(h.planned) == 0 {
		return nil, nil
	}
	h.ref = m.NewRecordRef(0, 1) // the guard: the record goes when its last held record is handed on
	if size > 0 {
		if err := m.ContentRoom(size); err != nil {
			return nil, err
		}
		if m.cfg.Journaled {
			payload, err := (&plog.ProtoMarshaler{}).MarshalLogs(copies)
			if err == nil {
				h.ref.id, err = m.journal.Append(context.Background(), journal.KindScores, h.now, Metadata(info),
					payload)
			}
			if err != nil {
				return nil, fmt.Errorf("svcspanfilter: recording held score records: %w", err)
			}
		}
	}
	return h, nil
}

// Apply takes the score records of ld as planned (HoldScores) and returns how many it held and dropped.
func (h *ScoreHold) Apply(ld plog.Logs) (held, dropped int) {
	if afterPlan != nil {
		afterPlan()
	}
	held, dropped = h.m.applyScores(h.req, h.sink, ld, h.now, h.ref, h.planned)
	h.ref.Done(1)
	h.m.Enforce()
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
func (m *Memory) applyScores(req *requestOrigin, sink any, ld plog.Logs, now time.Time, ref *RecordRef,
	planned []bool) (held, dropped int) {
	var out released
	var origin *logOrigin // of scope from, made for its first record held, with copies (ld goes on)
	var from plog.ScopeLogs
	n := 0
	eachScore(ld, func(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord) bool {
		sh := m.shards[m.shardOf(lr.TraceID())]
		sh.mu.Lock()
		defer sh.unlock(m)
		mayHold := planned == nil || planned[n]
		n++
		t := sh.traces[lr.TraceID()]
		if t == nil || !isDecided(t, pcommon.SpanID{}) {
			t = sh.touch(m, lr.TraceID(), now)
			d := m.decisionState(t)
			m.cfg.Outcome.ObserveScore(&d.state, lr)
			if d.firstAt.IsZero() || now.Before(d.firstAt) {
				d.firstAt = now
			}
			if mayHold {
				if sl != from {
					origin, from = newLogOrigin(req, sink, rl, sl), sl
				}
				hs := &heldScore{record: plog.NewLogRecord(), origin: origin, ref: ref, bytes: scoreSize(lr)}
				sh.holdScore(m, t, hs, lr)
				held++
				if _, matched := m.cfg.Outcome.Matched(&d.state); matched {
					sh.decide(m, t, now, &out)
				}
				return true
			}
			// Not written ahead (its trace was forgotten since the plan): it decides its trace at once.
			sh.decide(m, t, now, &out)
		}
		if t.dropped() {
			dropped++
			out.stats.ScoresDropped++
		}
		return t.dropped()
	})
	m.finish(&out)
	return held, dropped
}

func newLogOrigin(req *requestOrigin, sink any, rl plog.ResourceLogs, sl plog.ScopeLogs) *logOrigin {
	o := &logOrigin{request: req, sink: sink, resURL: rl.SchemaUrl(), scopeURL: sl.SchemaUrl(),
		resource: pcommon.NewResource(), scope: pcommon.NewInstrumentationScope()}
	rl.Resource().CopyTo(o.resource)
	sl.Scope().CopyTo(o.scope)
	return o
}

// holdScore holds hs, a copy of lr, in t: in the budget and the decision bytes, under its record.
func (sh *shard) holdScore(m *Memory, t *trace, hs *heldScore, lr plog.LogRecord) {
	lr.CopyTo(hs.record)
	t.keepRefs().scores = append(t.keepRefs().scores, hs)
	m.addBytes(t, hs.bytes)
	sh.pending.decisionBytes += hs.bytes
	sh.place(t)
	hs.ref.add(1)
}

// eachScore runs f on the score records of ld that follow their trace, removing those it says to.
func eachScore(ld plog.Logs, f func(plog.ResourceLogs, plog.ScopeLogs, plog.LogRecord) (remove bool)) {
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool { return IsHeldScore(lr) && f(rl, sl, lr) })
		}
	}
}

func scoreSize(lr plog.LogRecord) int64 { return mapSize(lr.Attributes()) + scoreCost }

// groupScores builds one delivery per request, records under copies of their resource and scope.
func (m *Memory) groupScores(scores []*heldScore) []*ScoreDelivery {
	if len(scores) == 0 {
		return nil
	}
	var out []*ScoreDelivery
	byRequest := map[*requestOrigin]*ScoreDelivery{} // a request came through one sink
	scopes := map[*logOrigin]plog.LogRecordSlice{}
	var total int64
	for _, hs := range scores {
		o := hs.origin
		d := byRequest[o.request]
		if d == nil {
			d = &ScoreDelivery{Info: o.request.info, Sink: o.sink, Logs: plog.NewLogs(), refs: map[*RecordRef]int{}}
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
	m.readyBytes.Add(total) // once: the held-scores path adds no atomic per record
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

// ScoreWake is signalled when score deliveries are queued.
func (m *Memory) ScoreWake() <-chan struct{} { return m.scoreWake }

// TakeReadyScores returns the queued score deliveries of sink (and those recovered, of no sink).
func (m *Memory) TakeReadyScores(sink any) (mine []*ScoreDelivery) {
	m.readyMu.Lock()
	defer m.readyMu.Unlock()
	m.readyScores = slices.DeleteFunc(m.readyScores, func(d *ScoreDelivery) bool {
		if d.Sink == sink || d.Sink == nil {
			mine = append(mine, d)
		}
		return d.Sink == sink || d.Sink == nil
	})
	return mine
}

// ScoresDelivered reports that the sink's next consumer accepted d (or gave it up for good).
func (m *Memory) ScoresDelivered(d *ScoreDelivery) {
	m.readyBytes.Add(-d.bytes)
	d.bytes = 0
	for r, n := range d.refs {
		r.Done(n)
	}
	d.refs = nil
}

// RequeueScores puts refused score deliveries back, ahead of those queued since.
func (m *Memory) RequeueScores(ds ...*ScoreDelivery) {
	m.readyMu.Lock()
	m.readyScores = append(append([]*ScoreDelivery(nil), ds...), m.readyScores...)
	m.readyMu.Unlock()
}

// DrainScores decides every undecided trace that holds score records (the logs side's shutdown,
// on_shutdown: release) and returns the sink's queued score deliveries.
func (m *Memory) DrainScores(sink any) []*ScoreDelivery {
	m.forWaiting(func(sh *shard, t *trace, out *released) {
		if t.refs != nil && len(t.refs.scores) > 0 {
			sh.decide(m, t, m.cfg.Now(), out)
		}
	})
	return m.TakeReadyScores(sink)
}

// recoverScores holds again the score records of a KindScores record, observed again, with their
// original time; those of traces decided kept (KindDecided, recovered before) go on at once.
func (m *Memory) recoverScores(rec journal.Record, ref *RecordRef) error {
	ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(rec.Payload)
	if err != nil {
		return err
	}
	info := client.Info{Metadata: client.NewMetadata(rec.Metadata)}
	m.applyScores(newRequestOrigin(info), nil, ld, rec.HeldAt, ref, nil)
	if n := ld.LogRecordCount(); n > 0 { // of traces decided kept: they go on under the record
		ref.add(n)
		m.readyBytes.Add(int64(n) * scoreCost)
		d := &ScoreDelivery{Info: info, Logs: ld, Records: n, bytes: int64(n) * scoreCost, refs: map[*RecordRef]int{ref: n}}
		queue(m, &m.readyScores, []*ScoreDelivery{d}, m.scoreWake)
	}
	return nil
}
