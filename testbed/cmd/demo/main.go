// Command demo shows the gateway at work: it starts the local svc platform and the built
// collector with the default gateway config, sends GenAI agent traces (with ordinary HTTP and
// database spans around them, PII in a prompt, and evaluation events) through a real
// OpenTelemetry SDK, then reads back through the platform's v2 observations and v3 scores APIs
// what arrived, prints it, and stops everything.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/readapi"
	"github.com/svc/svc-collector/testbed/workload"
)

const (
	demoPublicKey = "pk-svc-demo"
	demoSecretKey = "sk-svc-demo-secret"
	demoEmail     = "jane.doe@example.com"
)

func main() {
	bin := flag.String("collector", filepath.Join(collector.RepoRoot(), "bin", "svc-otelcol"), "collector binary")
	config := flag.String("config", collector.DefaultConfig(), "collector config")
	traces := flag.Int("traces", 3, "agent traces to send")
	deployment := flag.String("deployment", platform.HostedOldOrg.String(),
		"the local platform's setting, which decides when it shows a span request: self-hosted, hosted-new-org or hosted-old-org")
	flag.Parse()
	d, err := platform.ParseDeployment(*deployment)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *bin, *config, *traces, d); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, bin, config string, traces int, d platform.Deployment) error {
	// Staged data shows after 3 s here (up to about ten minutes on the hosted platform).
	p, err := platform.Start(platform.Options{PublicKey: demoPublicKey, SecretKey: demoSecretKey, Deployment: d, StagedDelay: 3 * time.Second})
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintf(out, "local svc platform   %s (version %s, %s: staged span requests show %s late)\n", p.URL(), p.Version(), d, p.StagedDelay())

	startCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	c, err := collector.Start(startCtx, collector.Options{
		Binary:  bin,
		Configs: []string{config},
		Env:     []string{"SVC_ENDPOINT=" + p.URL(), "SVC_PUBLIC_KEY=" + demoPublicKey, "SVC_SECRET_KEY=" + demoSecretKey},
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(out, "collector stop:", err)
		}
	}()
	fmt.Fprintf(out, "svc-otelcol          OTLP/HTTP %s, OTLP/gRPC %s (config %s)\n\n", c.OTLPHTTPEndpoint, c.OTLPGRPCEndpoint, config)

	sent, err := send(ctx, c.OTLPHTTPEndpoint, traces)
	if err != nil {
		return err
	}
	older, err := sendOlderSDKTrace(ctx, c.OTLPHTTPEndpoint)
	if err != nil {
		return err
	}
	totalSpans, genAISpans, scores := 0, 0, 0
	for _, s := range sent {
		totalSpans += s.TotalSpans
		genAISpans += len(s.GenAISpans)
		scores += s.Scores
	}
	fmt.Fprintf(out, "sent %d agent traces: %d spans (%d GenAI), %d evaluation events, one prompt with the e-mail %s\n",
		len(sent), totalSpans, genAISpans, scores, demoEmail)
	fmt.Fprintf(out, "sent 1 trace of the svc Python SDK 3 (an older major: %d spans)\n", len(older.GenAISpans))
	genAISpans += len(older.GenAISpans)

	waitCtx, cancelWait := context.WithTimeout(ctx, 60*time.Second)
	defer cancelWait()
	if err := p.WaitForSpans(waitCtx, genAISpans); err != nil {
		return fmt.Errorf("waiting for the platform to receive %d GenAI spans: %w\ncollector output:\n%s", genAISpans, err, c.Logs())
	}
	if err := p.WaitForScores(waitCtx, scores); err != nil {
		return fmt.Errorf("waiting for the platform to receive %d scores: %w\ncollector output:\n%s", scores, err, c.Logs())
	}

	client := readapi.Client{BaseURL: p.URL(), PublicKey: demoPublicKey, SecretKey: demoSecretKey}
	fmt.Fprintf(out, "\nwhat the platform stored, read back through GET /api/public/v2/observations and /v3/scores:\n")
	for _, s := range sent {
		if err := printTrace(ctx, out, client, s); err != nil {
			return err
		}
	}
	printWritePaths(ctx, out, p, append(sent, older))
	printDelivery(out, p)
	return nil
}

// sendOlderSDKTrace sends a trace as the svc Python SDK 3 writes it (scope svc-sdk 3.x): the
// platform keeps such spans on its staged path on purpose, and so does the gateway.
func sendOlderSDKTrace(ctx context.Context, endpoint string) (workload.AgentTrace, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure())
	if err != nil {
		return workload.AgentTrace{}, err
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("legacy-agent"), semconv.TelemetrySDKLanguagePython)
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp))
	tracer := tp.Tracer("svc-sdk", trace.WithInstrumentationVersion("3.38.0"))
	ctx2, root := tracer.Start(ctx, "legacy-agent", trace.WithAttributes(attribute.String("svc.observation.type", "agent")))
	_, gen := tracer.Start(ctx2, "legacy-generation", trace.WithAttributes(
		attribute.String("svc.observation.type", "generation"), attribute.String("gen_ai.request.model", "gpt-4o")))
	gen.End()
	root.End()
	if err := tp.Shutdown(ctx); err != nil {
		return workload.AgentTrace{}, fmt.Errorf("send to the collector: %w", err)
	}
	return workload.AgentTrace{TraceID: root.SpanContext().TraceID(), AgentSpan: root.SpanContext().SpanID(),
		GenAISpans: map[string]trace.SpanID{"legacy-agent": root.SpanContext().SpanID(), "legacy-generation": gen.SpanContext().SpanID()}, TotalSpans: 2}, nil
}

// printWritePaths says, per trace, how the platform wrote its span requests (at once, or staged
// to show minutes later on the hosted platform) and how long after a span ended the platform
// showed it, once every span is visible.
func printWritePaths(ctx context.Context, out io.Writer, p *platform.Platform, sent []workload.AgentTrace) {
	fmt.Fprintf(out, "\nwhen the platform shows each trace (%s):\n", p.Deployment())
	for _, s := range sent {
		traceID := hex.EncodeToString(s.TraceID[:])
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := p.WaitVisible(waitCtx, traceID, len(s.GenAISpans))
		cancel()
		if err != nil {
			fmt.Fprintf(out, "  trace %s: not all spans visible: %v\n", traceID, err)
			continue
		}
		paths := map[platform.WritePath]int{}
		var slowest time.Duration
		for _, w := range p.SpanWrites(traceID) {
			paths[w.WritePath]++
			slowest = max(slowest, w.EndToVisible())
		}
		how := fmt.Sprintf("%d spans written at once", paths[platform.WritePathDirect])
		if n := paths[platform.WritePathDual]; n > 0 {
			how = fmt.Sprintf("%d spans staged (older SDK major: the path its direct export takes), %d written at once", n, paths[platform.WritePathDirect])
		}
		fmt.Fprintf(out, "  trace %s: %s; each span shown at most %s after it ended\n", traceID, how, slowest.Round(10*time.Millisecond))
	}
}

// send emits the agent traces through an OpenTelemetry SDK, as an instrumented Go service would.
func send(ctx context.Context, endpoint string, traces int) ([]workload.AgentTrace, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure())
	if err != nil {
		return nil, err
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("support-agent"),
		semconv.DeploymentEnvironmentName("demo"), semconv.TelemetrySDKLanguageGo)
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp))
	sent := make([]workload.AgentTrace, 0, traces)
	for i := range traces {
		opts := workload.AgentOptions{Seed: uint64(i + 1), Evaluations: true}
		if i == 0 {
			opts.UserEmail = demoEmail
		}
		sent = append(sent, workload.EmitAgentTrace(ctx, tp, opts))
	}
	if err := tp.Shutdown(ctx); err != nil { // flushes
		return nil, fmt.Errorf("send to the collector: %w", err)
	}
	return sent, nil
}

// printTrace prints one trace as the platform holds it: its observation tree, the metadata with
// its JSON types, and its scores.
func printTrace(ctx context.Context, out io.Writer, client readapi.Client, sent workload.AgentTrace) error {
	traceID := hex.EncodeToString(sent.TraceID[:])
	obs, err := client.Observations(ctx, traceID, "")
	if err != nil {
		return err
	}
	scores, err := client.Scores(ctx, url.Values{"traceId": {traceID}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\ntrace %s: %d of %d spans sent are observations\n", traceID, len(obs), sent.TotalSpans)
	children := map[string][]readapi.Observation{}
	ids := map[string]bool{}
	for _, o := range obs {
		ids[o.ID] = true
	}
	for _, o := range obs {
		parent := o.Parent()
		if !ids[parent] {
			parent = "" // a root on the platform
		}
		children[parent] = append(children[parent], o)
	}
	scoresOf := map[string][]readapi.Score{}
	for _, s := range scores {
		key := ""
		if s.ObservationID != nil {
			key = *s.ObservationID
		}
		scoresOf[key] = append(scoresOf[key], s)
	}
	var walk func(parent, indent string)
	walk = func(parent, indent string) {
		list := children[parent]
		sort.Slice(list, func(i, j int) bool { return list[i].StartTime < list[j].StartTime })
		for _, o := range list {
			line := fmt.Sprintf("%s%-11s %s", indent, o.Type, o.Name)
			if o.Model != nil && *o.Model != "" {
				line += "  model=" + *o.Model
			}
			fmt.Fprintln(out, line)
			if len(o.Metadata) > 0 {
				fmt.Fprintf(out, "%s            metadata %s\n", indent, typedMetadata(o.Metadata))
			}
			if o.Input != nil && strings.Contains(*o.Input, "reach me at") {
				fmt.Fprintf(out, "%s            input    …%s\n", indent, around(*o.Input, "reach me at", 48))
			}
			for _, s := range scoresOf[o.ID] {
				fmt.Fprintf(out, "%s            score    %s = %v (%s)\n", indent, s.Name, s.Value, s.DataType)
			}
			walk(o.ID, indent+"  ")
		}
	}
	walk("", "  ")
	for _, s := range scoresOf[""] {
		fmt.Fprintf(out, "  trace score %s = %v (%s)\n", s.Name, s.Value, s.DataType)
	}
	return nil
}

// typedMetadata shows metadata values with their JSON types as the platform serves them: the
// demo's spans are a Go service's (third-party), so the platform stores their metadata as it
// arrives and an int stays a number, a string the same string (no JSON quotes added).
func typedMetadata(md map[string]any) string {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		b, _ := json.Marshal(md[k])
		parts = append(parts, fmt.Sprintf("%s=%s (%s)", k, b, jsonType(md[k])))
	}
	return strings.Join(parts, ", ")
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func around(s, marker string, n int) string {
	i := strings.Index(s, marker)
	end := min(len(s), i+n)
	return s[i:end] + "…"
}

func printDelivery(out io.Writer, p *platform.Platform) {
	st := p.Stats()
	var traceReqs, traceBytes, traceDecoded int64
	gzip := 0
	for _, r := range p.Requests(platform.EndpointTraces) {
		traceReqs++
		traceBytes += r.BodyBytes
		traceDecoded += r.DecodedBytes
		if r.Gzip {
			gzip++
		}
	}
	scoreReqs := len(p.Requests(platform.EndpointScores))
	fmt.Fprintf(out, "\ndelivery: %d span batches (%d gzip, %d bytes on the wire for %d bytes of OTLP), %d spans stored once each (%d duplicate deliveries); %d score batches, %d scores stored\n",
		traceReqs, gzip, traceBytes, traceDecoded, st.UniqueSpans, st.DuplicateSpanDeliveries, scoreReqs, st.UniqueScores)
	if st.DuplicateSpanDeliveries > 0 {
		fmt.Fprintln(out, "note: duplicate deliveries are upserted by the platform")
	}
}
