// Command loadgen sends the testbed's GenAI workload to a collector's OTLP receiver at a set rate
// or as fast as the collector takes it, and prints what was accepted, refused and rejected.
//
//	go run ./cmd/loadgen --endpoint 127.0.0.1:4318 --rate 2000 --duration 30s
//	go run ./cmd/loadgen --protocol grpc --endpoint 127.0.0.1:4317 --rate 0 --duration 10s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/svc/svc-collector/testbed/loadgen"
)

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:4318", "the collector's OTLP host:port for the protocol (loopback only)")
	protocol := flag.String("protocol", loadgen.ProtocolHTTP, "http (OTLP/HTTP protobuf) or grpc")
	gzip := flag.Bool("gzip", false, "compress requests")
	rate := flag.Float64("rate", 1000, "input spans per second; 0 sends as fast as the collector answers")
	duration := flag.Duration("duration", 10*time.Second, "how long to send (the run stops by itself)")
	maxTraces := flag.Int("max-traces", 0, "stop after this many traces (0: duration only)")
	concurrency := flag.Int("concurrency", 4, "requests in flight")
	requestSpans := flag.Int("request-spans", 512, "spans per request (whole traces)")
	seed := flag.Uint64("seed", 1, "workload seed: the same seed sends the same traces")
	firstSeq := flag.Uint64("first-seq", 0, "sequence number of the first trace (runs into one platform must not overlap)")
	ioMin := flag.Int("io-min", 1<<10, "smallest LLM input/output, bytes")
	ioMax := flag.Int("io-max", 100<<10, "largest LLM input/output, bytes")
	plain := flag.Float64("plain-share", 0.7, "share of ordinary HTTP/database spans")
	pii := flag.Float64("pii-share", 0.25, "share of traces with PII")
	metaMin := flag.Int("metadata-min", 5, "fewest metadata keys per LLM span")
	metaMax := flag.Int("metadata-max", 15, "most metadata keys per LLM span")
	noEval := flag.Bool("no-evaluations", false, "leave out the evaluation events")
	asJSON := flag.Bool("json", false, "print the result as JSON")
	flag.Parse()

	w, err := loadgen.NewWorkload(loadgen.WorkloadOptions{
		Seed: *seed, IOMinBytes: *ioMin, IOMaxBytes: *ioMax, PlainShare: *plain, PIIShare: *pii,
		MetadataMinKeys: *metaMin, MetadataMaxKeys: *metaMax, NoEvaluations: *noEval,
	})
	if err != nil {
		fail(err)
	}
	s, err := loadgen.NewSender(loadgen.SenderOptions{Protocol: *protocol, Endpoint: *endpoint, Gzip: *gzip})
	if err != nil {
		fail(err)
	}
	defer s.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sh := w.Shape()
	fmt.Fprintf(os.Stderr, "sending to %s over %s: %.1f spans per trace (%.0f%% plain), %.0f KiB per trace\n",
		*endpoint, *protocol, sh.SpansPerTrace, 100*sh.PlainShare, sh.BytesPerTrace/1024)
	res, err := loadgen.Run(ctx, w, s, loadgen.RunOptions{
		Rate: *rate, Duration: *duration, MaxTraces: *maxTraces, FirstSeq: *firstSeq,
		Concurrency: *concurrency, RequestSpans: *requestSpans,
	})
	if err != nil {
		fail(err)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
		return
	}
	fmt.Printf("sent      %8d spans %7d traces %6d requests  %.0f spans/s over %s\n", res.Sent.Spans, res.Sent.Traces, res.Sent.Requests, res.OfferedRate(), res.Sending.Round(time.Millisecond))
	fmt.Printf("accepted  %8d spans %7d traces %6d requests  (%d GenAI spans, %d scores to deliver)\n", res.Accepted.Spans, res.Accepted.Traces, res.Accepted.Requests, res.Accepted.GenAISpans, res.Accepted.Scores)
	fmt.Printf("refused   %8d spans %7d traces %6d requests  (back-off asked)\n", res.Refused.Spans, res.Refused.Traces, res.Refused.Requests)
	fmt.Printf("rejected  %8d spans %7d traces %6d requests\n", res.Rejected.Spans, res.Rejected.Traces, res.Rejected.Requests)
	fmt.Printf("failed    %8d spans %7d traces %6d requests  (no answer)\n", res.Failed.Spans, res.Failed.Traces, res.Failed.Requests)
	fmt.Printf("answers   %v; behind schedule by %s at worst; next sequence number %d\n", res.Statuses, res.MaxLag.Round(time.Millisecond), res.NextSeq)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(1)
}
