// Package loadgen sends a realistic GenAI workload to a collector over OTLP (HTTP or gRPC), at a
// set rate or as fast as the collector takes it, and counts what the collector accepted, refused
// and rejected, so that a load run or a fault test can compare with what reached the platform.
//
// The traces are agent traces of testbed/workload (LLM, tool and retrieval spans with 1–100 KB of
// input and output, 5–15 metadata keys, PII to mask, evaluation events) among ordinary HTTP and
// database spans, produced by the real OpenTelemetry Go SDK and encoded by its own OTLP exporter.
// A pool of such traces is built once from a seed; every trace sent is one of them with fresh ids
// written into its encoded bytes, so that sending costs little CPU beside the collector under
// test and every span has an id of its own for counting deliveries.
package loadgen

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/svc/svc-collector/testbed/workload"
)

// WorkloadOptions shape the traces. Zero values take the defaults of the workload.
type WorkloadOptions struct {
	// Seed makes every trace, id and choice of the run deterministic.
	Seed uint64
	// Templates is how many distinct traces are generated through the SDK; default 64.
	Templates int
	// IOMinBytes and IOMaxBytes bound the size of each LLM input and output (log-uniform);
	// default 1 KiB and 100 KiB.
	IOMinBytes, IOMaxBytes int
	// MetadataMinKeys and MetadataMaxKeys bound the observation metadata keys per LLM span;
	// default 5 and 15.
	MetadataMinKeys, MetadataMaxKeys int
	// PlainShare is the share of ordinary HTTP and database spans among all spans, below 1;
	// default 0.7. An agent trace has 7 plain spans of 12 of its own, so shares below 7/12
	// give 7/12.
	PlainShare float64
	// PIIShare is the share of traces with an e-mail address, a card number and an API key in
	// the prompt and an e-mail address in a metadata value; default 0.25. Negative: none.
	PIIShare float64
	// NoEvaluations leaves out the evaluation events (3 scores per trace otherwise).
	NoEvaluations bool
	// InvalidScoreShare is the share of traces with one more score event that the platform
	// rejects (workload.AgentOptions.InvalidScore); default none.
	InvalidScoreShare float64
	// Mix draws the LLM spans of each trace from one of the instrumentation shapes of
	// workload.Shapes in turn (Vercel AI SDK, OpenLLMetry, OpenInference, GenAI semantic
	// conventions old and new, svc SDK), instead of the GenAI semantic conventions alone.
	Mix bool
}

func (o WorkloadOptions) withDefaults() WorkloadOptions {
	if o.Templates <= 0 {
		o.Templates = 64
	}
	if o.IOMinBytes <= 0 {
		o.IOMinBytes = 1 << 10
	}
	if o.IOMaxBytes <= 0 {
		o.IOMaxBytes = 100 << 10
	}
	if o.MetadataMinKeys <= 0 {
		o.MetadataMinKeys = 5
	}
	if o.MetadataMaxKeys <= 0 {
		o.MetadataMaxKeys = 15
	}
	if o.MetadataMaxKeys < o.MetadataMinKeys {
		o.MetadataMaxKeys = o.MetadataMinKeys
	}
	if o.PlainShare <= 0 {
		o.PlainShare = 0.7
	}
	if o.PIIShare == 0 {
		o.PIIShare = 0.25
	}
	return o
}

// Workload is the pool of encoded traces of one seed. It is safe for concurrent use.
type Workload struct {
	opts      WorkloadOptions
	templates []template
	// now is the clock that dates the traces sent; tests fix it.
	now func() time.Time
}

// template is one encoded trace (an ExportTraceServiceRequest holding it alone) and where its
// ids sit in the bytes.
type template struct {
	body []byte
	// timeAt are the offsets of the span start and end and event times (fixed64, little
	// endian); timeOf their times relative to the start of the trace. Times are written when
	// a trace is sent, so that the trace has just ended.
	timeAt   []int
	timeOf   []uint64
	duration uint64
	// traceIDAt are the offsets of the 16 trace id bytes of every span.
	traceIDAt []int
	// spanIDAt[i] are the offsets of span i's 8 id bytes: as its span_id and as the
	// parent_span_id of each child.
	spanIDAt [][]int
	// genAI are the indexes of the spans the GenAI span filter keeps.
	genAI         []int
	scores        int
	invalidScores int
}

// Template ids are drawn from their own generator, so their bytes are found unambiguously.
type templateIDs struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (g *templateIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var t trace.TraceID
	binary.BigEndian.PutUint64(t[:8], g.rng.Uint64()|1)
	binary.BigEndian.PutUint64(t[8:], g.rng.Uint64()|1)
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], g.rng.Uint64()|1)
	return t, s
}

func (g *templateIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], g.rng.Uint64()|1)
	return s
}

// spanCollector keeps the ended spans of the trace being generated.
type spanCollector struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (c *spanCollector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *spanCollector) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, s)
}
func (c *spanCollector) Shutdown(context.Context) error   { return nil }
func (c *spanCollector) ForceFlush(context.Context) error { return nil }

func (c *spanCollector) take() []sdktrace.ReadOnlySpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.spans
	c.spans = nil
	return out
}

// captureClient is an OTLP client that keeps what the SDK's exporter would send.
type captureClient struct{ last []*tracepb.ResourceSpans }

func (c *captureClient) Start(context.Context) error { return nil }
func (c *captureClient) Stop(context.Context) error  { return nil }
func (c *captureClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.last = rs
	return nil
}

// Resource of the simulated application: fixed, so that the workload does not depend on the
// host or the executable.
var appResource = resource.NewSchemaless(
	attribute.String("service.name", "support-agent"),
	attribute.String("service.version", "3.1.0"),
	attribute.String("deployment.environment.name", "production"),
	attribute.String("telemetry.sdk.language", "go"),
	attribute.String("telemetry.sdk.name", "opentelemetry"),
	attribute.String("telemetry.sdk.version", "1.47.0"),
)

// NewWorkload generates the pool of traces through the OpenTelemetry SDK.
func NewWorkload(opts WorkloadOptions) (*Workload, error) {
	opts = opts.withDefaults()
	if opts.PlainShare >= 1 {
		return nil, fmt.Errorf("loadgen: PlainShare %v: a trace needs GenAI spans, the share must be below 1", opts.PlainShare)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x6a09e667f3bcc909))
	spans := &spanCollector{}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(spans),
		sdktrace.WithIDGenerator(&templateIDs{rng: rand.New(rand.NewPCG(opts.Seed^0xbb67ae8584caa73b, opts.Seed))}),
		sdktrace.WithResource(appResource),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	defer func() { _ = tp.Shutdown(ctx) }()
	// Applications of an SDK that sets its own telemetry.sdk.language (the svc SDK for Python).
	providers := map[string]*sdktrace.TracerProvider{"": tp}
	providerFor := func(language string) *sdktrace.TracerProvider {
		if p, ok := providers[language]; ok {
			return p
		}
		res, _ := resource.Merge(appResource, resource.NewSchemaless(attribute.String("telemetry.sdk.language", language)))
		p := sdktrace.NewTracerProvider(
			sdktrace.WithSpanProcessor(spans),
			sdktrace.WithIDGenerator(&templateIDs{rng: rand.New(rand.NewPCG(opts.Seed^0x3c6ef372fe94f82b, opts.Seed))}),
			sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.AlwaysSample()),
		)
		providers[language] = p
		return p
	}
	defer func() {
		for _, p := range providers {
			_ = p.Shutdown(ctx)
		}
	}()
	capture := &captureClient{}
	exporter, err := otlptrace.New(ctx, capture)
	if err != nil {
		return nil, err
	}

	w := &Workload{opts: opts, now: time.Now}
	// Extra plain spans per trace are spread so that the pool's share of plain spans is as
	// close to PlainShare as whole spans allow (error diffusion over the pool).
	probe := workload.EmitAgentTrace(ctx, noop.NewTracerProvider(), workload.AgentOptions{})
	ownSpans, ownPlain := float64(probe.TotalSpans), float64(probe.TotalSpans-len(probe.GenAISpans))
	extraPerTrace := max(0, (opts.PlainShare*ownSpans-ownPlain)/(1-opts.PlainShare))
	carried := 0.0
	for i := range opts.Templates {
		carried += extraPerTrace
		extra := int(carried)
		carried -= float64(extra)
		agent := workload.AgentOptions{
			Seed:            rng.Uint64(),
			IOBytes:         opts.IOMinBytes,
			IOBytesMax:      opts.IOMaxBytes,
			MetadataKeys:    opts.MetadataMinKeys + rng.IntN(opts.MetadataMaxKeys-opts.MetadataMinKeys+1),
			Evaluations:     !opts.NoEvaluations,
			ExtraPlainSpans: extra,
			InvalidScore:    rng.Float64() < opts.InvalidScoreShare,
		}
		if rng.Float64() < opts.PIIShare {
			agent.UserEmail = fmt.Sprintf("customer.%04d@example.com", rng.IntN(10000))
			agent.PromptPII = []string{"My card is 4111 1111 1111 1111.", "Use key sk-proj-" + randomKey(rng, 32) + " for the lookup."}
			agent.MetadataPII = agent.UserEmail
		}
		traceProvider := tp
		if opts.Mix {
			shape := workload.Shapes[i%len(workload.Shapes)]
			agent.Shape = shape.Name
			traceProvider = providerFor(shape.SDKLanguage)
		}
		sent := workload.EmitAgentTrace(ctx, traceProvider, agent)
		if err := exporter.ExportSpans(ctx, spans.take()); err != nil {
			return nil, err
		}
		t, err := encodeTemplate(capture.last, sent)
		if err != nil {
			return nil, fmt.Errorf("trace %d of the pool: %w", i, err)
		}
		w.templates = append(w.templates, t)
	}
	return w, nil
}

func randomKey(rng *rand.Rand, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// Protobuf field keys that precede the ids in an encoded Span (trace_id = 1, span_id = 2,
// parent_span_id = 4, all bytes) followed by the length byte. Searching for key and length
// with the id keeps a match inside a string attribute from being taken for an id.
var (
	traceIDKey      = []byte{0x0a, 16}
	spanIDKey       = []byte{0x12, 8}
	parentSpanIDKey = []byte{0x22, 8}
)

func encodeTemplate(rs []*tracepb.ResourceSpans, sent workload.AgentTrace) (template, error) {
	t := template{scores: sent.Scores, invalidScores: sent.InvalidScores}
	sentinels := stampTimes(rs, &t)
	body, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rs})
	if err != nil {
		return template{}, err
	}
	t.body = body
	for i, sentinel := range sentinels {
		var at []int
		for _, key := range []byte{startTimeKey, endTimeKey, eventTimeKey} {
			var v [8]byte
			binary.LittleEndian.PutUint64(v[:], sentinel)
			at = append(at, find(body, []byte{key}, v[:])...)
		}
		if len(at) != 1 {
			return template{}, fmt.Errorf("time %d found %d times in the encoding, want once", i, len(at))
		}
		t.timeAt = append(t.timeAt, at[0])
	}
	genAI := map[trace.SpanID]bool{}
	for _, id := range sent.GenAISpans {
		genAI[id] = true
	}
	children := map[[8]byte]int{}
	var ids [][8]byte
	for _, r := range rs {
		for _, ss := range r.ScopeSpans {
			for _, s := range ss.Spans {
				if !bytes.Equal(s.TraceId, sent.TraceID[:]) {
					return template{}, errors.New("a span of another trace was exported with the trace")
				}
				var id [8]byte
				copy(id[:], s.SpanId)
				if genAI[trace.SpanID(id)] {
					t.genAI = append(t.genAI, len(ids))
				}
				ids = append(ids, id)
				if len(s.ParentSpanId) == 8 {
					children[[8]byte(s.ParentSpanId)]++
				}
			}
		}
	}
	if len(ids) != sent.TotalSpans || len(t.genAI) != len(sent.GenAISpans) {
		return template{}, fmt.Errorf("exported %d spans (%d GenAI), the workload sent %d (%d GenAI)",
			len(ids), len(t.genAI), sent.TotalSpans, len(sent.GenAISpans))
	}
	t.traceIDAt = find(body, traceIDKey, sent.TraceID[:])
	if len(t.traceIDAt) != len(ids) {
		return template{}, fmt.Errorf("trace id found %d times in the encoding, want once per span (%d)", len(t.traceIDAt), len(ids))
	}
	for _, id := range ids {
		own := find(body, spanIDKey, id[:])
		asParent := find(body, parentSpanIDKey, id[:])
		if len(own) != 1 || len(asParent) != children[id] {
			return template{}, fmt.Errorf("span id %x found %d times as span id and %d as parent, want 1 and %d",
				id, len(own), len(asParent), children[id])
		}
		t.spanIDAt = append(t.spanIDAt, append(own, asParent...))
	}
	return t, nil
}

// Protobuf keys of the fixed64 times: Span start_time_unix_nano = 7, end_time_unix_nano = 8,
// Span.Event time_unix_nano = 1.
const (
	startTimeKey = 7<<3 | 1
	endTimeKey   = 8<<3 | 1
	eventTimeKey = 1<<3 | 1
)

// timeStep is the synthetic time between two consecutive moments of a trace.
const timeStep = uint64(3 * time.Millisecond)

// stampTimes replaces the SDK's clock readings by sentinels to find in the encoding, and keeps
// in t the trace's times as synthetic offsets: the clock readings' order, one timeStep apart,
// so that the template does not depend on when or how fast it was generated.
func stampTimes(rs []*tracepb.ResourceSpans, t *template) []uint64 {
	type moment struct {
		at  *uint64
		val uint64
	}
	var moments []moment
	for _, r := range rs {
		for _, ss := range r.ScopeSpans {
			for _, s := range ss.Spans {
				moments = append(moments, moment{&s.StartTimeUnixNano, s.StartTimeUnixNano}, moment{&s.EndTimeUnixNano, s.EndTimeUnixNano})
				for _, e := range s.Events {
					moments = append(moments, moment{&e.TimeUnixNano, e.TimeUnixNano})
				}
			}
		}
	}
	order := make([]int, len(moments))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(moments[a].val, moments[b].val) })
	rank := make([]uint64, len(moments))
	for r, i := range order {
		rank[i] = uint64(r)
	}
	sentinels := make([]uint64, len(moments))
	for i, m := range moments {
		sentinels[i] = 0xf1e2d3c4_00000000 | uint64(i)
		*m.at = sentinels[i]
		t.timeOf = append(t.timeOf, rank[i]*timeStep)
	}
	t.duration = uint64(len(moments)) * timeStep
	return sentinels
}

// find returns the offsets of id wherever it follows key in b.
func find(b, key, id []byte) []int {
	pattern := append(append([]byte{}, key...), id...)
	var at []int
	for off := 0; ; {
		i := bytes.Index(b[off:], pattern)
		if i < 0 {
			return at
		}
		at = append(at, off+i+len(key))
		off += i + len(pattern)
	}
}

// TraceIDs are the ids a trace of the run was sent with.
type TraceIDs struct {
	TraceID [16]byte
	// SpanIDs are the ids of all its spans; GenAI indexes those the GenAI filter keeps.
	SpanIDs [][8]byte
	GenAI   []int
	// Scores is the number of score events in the trace; InvalidScores those of them the
	// platform rejects.
	Scores, InvalidScores int
}

// TraceIDHex is the trace id as the platform spells it.
func (t TraceIDs) TraceIDHex() string { return hex.EncodeToString(t.TraceID[:]) }

// Trace returns the ids of the trace with sequence number seq. Sequence numbers name the
// traces of a run: the same seed and seq give the same trace with the same ids.
func (w *Workload) Trace(seq uint64) TraceIDs {
	t := &w.templates[w.templateOf(seq)]
	out := TraceIDs{GenAI: t.genAI, Scores: t.scores, InvalidScores: t.invalidScores}
	hi, lo := w.traceID(seq)
	binary.BigEndian.PutUint64(out.TraceID[:8], hi)
	binary.BigEndian.PutUint64(out.TraceID[8:], lo)
	out.SpanIDs = make([][8]byte, len(t.spanIDAt))
	for i := range t.spanIDAt {
		binary.BigEndian.PutUint64(out.SpanIDs[i][:], spanID(lo, i))
	}
	return out
}

// Spans is the number of spans of the trace with sequence number seq.
func (w *Workload) Spans(seq uint64) int { return len(w.templates[w.templateOf(seq)].spanIDAt) }

func (w *Workload) templateOf(seq uint64) int {
	return int(mix(w.opts.Seed^mix(seq^0x3c6ef372fe94f82b)) % uint64(len(w.templates)))
}

func (w *Workload) traceID(seq uint64) (hi, lo uint64) {
	hi = mix(w.opts.Seed ^ mix(seq))
	lo = mix(hi ^ 0xa54ff53a5f1d36f1)
	return hi | 1, lo | 1
}

func spanID(traceLo uint64, i int) uint64 { return mix(traceLo+uint64(i+1)*0x9e3779b97f4a7c15) | 1 }

// mix is splitmix64's finalizer: consecutive inputs give unrelated outputs.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Request is one OTLP export request of whole traces.
type Request struct {
	// FirstSeq and Traces: the request holds the traces FirstSeq .. FirstSeq+Traces-1.
	FirstSeq uint64
	Traces   int
	// Spans counts all spans, GenAISpans those the GenAI filter keeps, Scores the score
	// events, InvalidScores those of them the platform rejects.
	Spans, GenAISpans, Scores, InvalidScores int
	// Body is the encoded ExportTraceServiceRequest (protobuf, uncompressed).
	Body []byte
}

// NewRequest encodes the traces from firstSeq on, at least one, until the request holds
// maxTraces traces (0: no limit) or the next trace would take it over maxSpans spans or
// maxBytes bytes. Each request has a body of its own: an HTTP transport may still be reading
// a body after the answer came, so bodies are not reused.
func (w *Workload) NewRequest(firstSeq uint64, maxTraces, maxSpans, maxBytes int) *Request {
	r := &Request{FirstSeq: firstSeq}
	var body []byte
	now := uint64(w.now().UnixNano())
	for seq := firstSeq; ; seq++ {
		t := &w.templates[w.templateOf(seq)]
		if r.Traces > 0 && (r.Traces == maxTraces || r.Spans+len(t.spanIDAt) > maxSpans || len(body)+len(t.body) > maxBytes) {
			break
		}
		// Encoded messages concatenate: the repeated resource_spans of each part add up.
		start := len(body)
		body = append(body, t.body...)
		w.writeIDs(body[start:], t, seq, now)
		r.Traces++
		r.Spans += len(t.spanIDAt)
		r.GenAISpans += len(t.genAI)
		r.Scores += t.scores
		r.InvalidScores += t.invalidScores
	}
	r.Body = body
	return r
}

// writeIDs gives the trace seq its ids and times: it ends at now.
func (w *Workload) writeIDs(b []byte, t *template, seq uint64, now uint64) {
	start := now - t.duration
	for i, at := range t.timeAt {
		binary.LittleEndian.PutUint64(b[at:], start+t.timeOf[i])
	}
	hi, lo := w.traceID(seq)
	for _, at := range t.traceIDAt {
		binary.BigEndian.PutUint64(b[at:], hi)
		binary.BigEndian.PutUint64(b[at+8:], lo)
	}
	for i, offsets := range t.spanIDAt {
		id := spanID(lo, i)
		for _, at := range offsets {
			binary.BigEndian.PutUint64(b[at:], id)
		}
	}
}

// Shape summarizes the pool: what an average trace holds.
type Shape struct {
	Templates                         int
	SpansPerTrace, GenAISpansPerTrace float64
	PlainShare                        float64
	BytesPerTrace                     float64
	ScoresPerTrace                    float64
}

// Shape describes the pool, for reports.
func (w *Workload) Shape() Shape {
	s := Shape{Templates: len(w.templates)}
	var spans, genAI, bytes, scores int
	for _, t := range w.templates {
		spans += len(t.spanIDAt)
		genAI += len(t.genAI)
		bytes += len(t.body)
		scores += t.scores
	}
	n := float64(len(w.templates))
	s.SpansPerTrace = float64(spans) / n
	s.GenAISpansPerTrace = float64(genAI) / n
	s.PlainShare = 1 - float64(genAI)/float64(spans)
	s.BytesPerTrace = float64(bytes) / n
	s.ScoresPerTrace = float64(scores) / n
	return s
}

// Options returns the options the workload was built with, defaults filled in.
func (w *Workload) Options() WorkloadOptions { return w.opts }
