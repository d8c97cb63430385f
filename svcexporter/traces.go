package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/zap"
)

// spanRef locates one span in a ptrace.Traces.
type spanRef struct{ resource, scope, span int }

// pushTraces sends td as pushSpans does, classified as the exporterhelper's converter does.
func (e *svcExporter) pushTraces(ctx context.Context, td ptrace.Traces) error {
	r := newSpansRequest(td, e.codec)
	if e.cfg.WritePath == WritePathAuto {
		r.class = classOf(ctx, td)
	}
	return e.pushSpans(ctx, r)
}

// pushRequest is the exporterhelper's consume function of span batches.
func (e *svcExporter) pushRequest(ctx context.Context, req xexporterhelper.Request) error {
	r, ok := req.(*spansRequest)
	if !ok {
		return consumererror.NewPermanent(fmt.Errorf("svc exporter: cannot send a %T as spans", req))
	}
	return e.pushSpans(ctx, r)
}

// pushSpans sends a span batch as one OTLP/protobuf request, its body as it was encoded (for the
// persistent queue, or by an earlier attempt) when it was. When the platform answers 413 the
// spans are split in halves and resent (see deliver), and so when it answers 400: the platform
// refuses a whole request for one malformed span, so the halves deliver every span it accepts.
// A span refused even alone is dropped, counted and logged with its trace and span id (never its
// content), and the rest is delivered. A 400 given to more requests than a few malformed spans
// explain stops the splitting (splitBudget): the spans not delivered by then are refused together,
// logged once. Only a 413 or 400 (or a compression changed since it was
// queued) decodes a batch read from the persistent queue. Under write_path auto a batch of one
// class goes as one request with its class's header (write_path.go); a mixed one, decoded, as a
// request of its Staged spans and one of its Direct spans, each split on its own.
func (e *svcExporter) pushSpans(ctx context.Context, req *spansRequest) error {
	total := req.ItemsCount()
	if total == 0 {
		return nil
	}
	creds, err := e.credentialsFor(ctx, total, "spans", e.telemetry.ExporterSvcSendFailedSpans)
	if err != nil {
		return err
	}
	var td ptrace.Traces
	var refs []spanRef // only needed, and built, once the platform answers 413 or 400
	// unsendable is set when the batch cannot be encoded, or its queued body decoded, here. That
	// happens before any part of the batch went out (the first request posts the whole batch,
	// the halves of a 413 need the spans), so nothing of it was delivered.
	var unsendable error
	// The write path of every request of the push, or, for a mixed batch (write_path auto), of
	// those of its Staged spans (refs[:staged]); those of its Direct spans go on the direct path.
	path := wirePathOf(e.cfg.WritePath, req.class)
	chunks, staged := []itemRange{{0, total}}, total
	if path == wireStaged && req.class == classMixed {
		if td, err = req.traces(); err != nil {
			return e.dropUnsendableSpans(ctx, total, consumererror.NewPermanent(err))
		}
		refs, staged = stagedFirst(td)
		switch staged {
		case 0:
			path = wireDirect
		case total:
		default: // the Staged spans in requests of their own; a split never mixes the two ranges
			chunks = []itemRange{{0, staged}, {staged, total}}
		}
	}
	res := deliver(total, chunks, func(r itemRange) error {
		if unsendable != nil {
			return unsendable
		}
		p := path
		if r.lo >= staged {
			p = wireDirect
		}
		if r.len() == total {
			body, err := req.wireBody() // the common case: no decoding, no copy
			if err != nil {
				unsendable = consumererror.NewPermanent(err)
				return unsendable
			}
			return e.postSpans(ctx, creds, body, p)
		}
		if refs == nil {
			if td, err = req.traces(); err != nil {
				unsendable = consumererror.NewPermanent(err)
				return unsendable
			}
			refs = spanRefs(td)
		}
		return e.sendSpans(ctx, creds, tracesOf(td, refs[r.lo:r.hi]), p)
	}, isTooLargeOrMalformed, isMalformed)
	if res.splits > 0 {
		e.telemetry.ExporterSvcRequestsSplit.Add(ctx, int64(res.splits))
	}
	if res.unsplitItems > 0 { // logged once, with the other permanent refusals, by outcome
		e.telemetry.ExporterSvcSpansRefusedInvalid.Add(ctx, int64(res.unsplitItems))
	}
	if unsendable != nil {
		return e.dropUnsendableSpans(ctx, total, unsendable)
	}
	if len(res.refusedAlone) > 0 {
		if refs == nil { // a batch of one span, refused whole
			if td, err = req.traces(); err == nil {
				refs = spanRefs(td)
			}
		}
		e.dropRefusedSpans(ctx, td, refs, res.refusedAlone)
	}
	return e.outcome(ctx, res, total, "spans", e.telemetry.ExporterSvcSentSpans, e.telemetry.ExporterSvcSendFailedSpans, func(err error, from int) error {
		if from == 0 {
			return err // the retry resends the batch as it is
		}
		// Only what was not sent yet goes back to the retry.
		return consumererror.NewTraces(err, tracesOf(td, refs[from:]))
	})
}

// dropUnsendableSpans fails for good a batch that cannot be sent for a local reason: a queued
// body that does not decode (already logged as an unreadable queue item, see
// spansRequest.traces) or spans that do not encode. The platform never saw it, so it is not
// reported as the platform's refusal.
func (e *svcExporter) dropUnsendableSpans(ctx context.Context, total int, err error) error {
	e.telemetry.ExporterSvcSendFailedSpans.Add(ctx, int64(total), e.failedPermanent)
	if !errors.Is(err, errCorruptQueuedSpans) {
		e.logger.Error("svc exporter cannot encode a span batch; it is dropped", zap.Int("dropped", total), zap.Error(err))
	}
	return err
}

func (e *svcExporter) sendSpans(ctx context.Context, c requestCredentials, td ptrace.Traces, path wirePath) error {
	body, _, err := e.codec.encode(td)
	if err != nil {
		return consumererror.NewPermanent(err)
	}
	return e.postSpans(ctx, c, body, path)
}

// postSpans posts a body made by e.codec on the write path path.
func (e *svcExporter) postSpans(ctx context.Context, c requestCredentials, body []byte, path wirePath) error {
	resp, err := e.post(ctx, c, e.tracesClient, e.tracesURL, contentTypeProtobuf, contentEncoding(e.codec.compression), body, path == wireDirect)
	if err != nil {
		return err
	}
	e.telemetry.ExporterSvcSpanRequestsAccepted.Add(ctx, 1, e.pathAttrs[path])
	e.logPartialSuccess(ctx, c, resp)
	return nil
}

// logPartialSuccess reports the spans a 2xx answer says were rejected (OTLP partial success).
func (e *svcExporter) logPartialSuccess(ctx context.Context, c requestCredentials, resp response) {
	if len(resp.body) == 0 {
		return
	}
	er := ptraceotlp.NewExportResponse()
	var err error
	switch {
	case strings.HasPrefix(resp.contentType, contentTypeProtobuf):
		err = er.UnmarshalProto(resp.body)
	case strings.HasPrefix(resp.contentType, contentTypeJSON):
		err = er.UnmarshalJSON(resp.body)
	default:
		return
	}
	if err != nil {
		e.logger.Debug("svc platform's trace response is not an OTLP ExportTraceServiceResponse", zap.Error(err))
		return
	}
	ps := er.PartialSuccess()
	if ps.RejectedSpans() == 0 && ps.ErrorMessage() == "" {
		return
	}
	e.telemetry.ExporterSvcSpansRejected.Add(ctx, ps.RejectedSpans())
	e.logger.Warn("svc platform accepted the spans partially",
		zap.Int64("rejected_spans", ps.RejectedSpans()),
		zap.String("public_key", c.publicKey),
		zap.String("message", e.serverMessage(c, "text/plain", []byte(ps.ErrorMessage()))))
}

// dropRefusedSpans counts and logs the spans the platform refused even in a request of their own:
// by trace and span id and name, never with their attributes or content.
func (e *svcExporter) dropRefusedSpans(ctx context.Context, td ptrace.Traces, refs []spanRef, items []refusedItem) {
	var tooLarge, malformed int64
	for _, it := range items {
		reason := "as too large"
		if isTooLarge(it.err) {
			tooLarge++
		} else {
			malformed++
			reason = "as malformed (400)"
		}
		if refs == nil { // the batch could not be decoded: no ids to log
			e.logger.Error("svc platform refused a span "+reason+" even on its own; the span is dropped", zap.Error(it.err))
			continue
		}
		span := spanAt(td, refs[it.index])
		e.logger.Error("svc platform refused a span "+reason+" even on its own; the span is dropped, the rest of its batch is delivered",
			zap.String("trace_id", span.TraceID().String()),
			zap.String("span_id", span.SpanID().String()),
			zap.String("span_name", span.Name()),
			zap.Error(it.err))
	}
	if tooLarge > 0 {
		e.telemetry.ExporterSvcSpansDroppedTooLarge.Add(ctx, tooLarge)
	}
	if malformed > 0 {
		e.telemetry.ExporterSvcSpansRefusedInvalid.Add(ctx, malformed)
	}
}

func spanRefs(td ptrace.Traces) []spanRef {
	refs := make([]spanRef, 0, td.SpanCount())
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			for k := 0; k < sss.At(j).Spans().Len(); k++ {
				refs = append(refs, spanRef{i, j, k})
			}
		}
	}
	return refs
}

func spanAt(td ptrace.Traces, r spanRef) ptrace.Span {
	return td.ResourceSpans().At(r.resource).ScopeSpans().At(r.scope).Spans().At(r.span)
}

// tracesOf copies the spans refs points at (in order) into a new ptrace.Traces, each under a
// copy of its own resource and scope.
func tracesOf(td ptrace.Traces, refs []spanRef) ptrace.Traces {
	out := ptrace.NewTraces()
	var rs ptrace.ResourceSpans
	var ss ptrace.ScopeSpans
	last := spanRef{-1, -1, -1}
	for _, r := range refs {
		src := td.ResourceSpans().At(r.resource)
		if r.resource != last.resource {
			rs = out.ResourceSpans().AppendEmpty()
			src.Resource().CopyTo(rs.Resource())
			rs.SetSchemaUrl(src.SchemaUrl())
			last.scope = -1
		}
		srcScope := src.ScopeSpans().At(r.scope)
		if r.scope != last.scope {
			ss = rs.ScopeSpans().AppendEmpty()
			srcScope.Scope().CopyTo(ss.Scope())
			ss.SetSchemaUrl(srcScope.SchemaUrl())
		}
		srcScope.Spans().At(r.span).CopyTo(ss.Spans().AppendEmpty())
		last = r
	}
	return out
}
