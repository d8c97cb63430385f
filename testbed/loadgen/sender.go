package loadgen

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // registers the gzip compressor for Gzip
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Verdict is what became of one export request.
type Verdict int

const (
	// Accepted: the collector answered success (HTTP 200, gRPC OK).
	Accepted Verdict = iota
	// Refused: the collector told the sender to back off (HTTP 429 or 503, gRPC
	// RESOURCE_EXHAUSTED or UNAVAILABLE); the data is not the collector's to deliver.
	Refused
	// Rejected: the collector refused the data for good (HTTP 400 and other 4xx, a gRPC code
	// the OTLP specification does not call retryable: INVALID_ARGUMENT, INTERNAL, ...).
	Rejected
	// Failed: no answer (timeout, connection error), or an answer that leaves it unknown
	// whether the collector took the data (HTTP 5xx other than 503, gRPC DEADLINE_EXCEEDED,
	// ABORTED, ...).
	Failed
)

func (v Verdict) String() string {
	switch v {
	case Accepted:
		return "accepted"
	case Refused:
		return "refused"
	case Rejected:
		return "rejected"
	default:
		return "failed"
	}
}

// Outcome is the answer to one export request.
type Outcome struct {
	Verdict Verdict
	// Status is the HTTP status code or gRPC code name, or the error when there was no answer.
	Status string
	// RejectedSpans is the partial success count of an accepted request.
	RejectedSpans int64
	// RetryAfter is the wait the collector asked for, if any.
	RetryAfter time.Duration
}

// Sender sends encoded ExportTraceServiceRequests to a collector.
type Sender interface {
	Send(ctx context.Context, body []byte) Outcome
	Close() error
}

// Protocols of NewSender.
const (
	ProtocolHTTP = "http"
	ProtocolGRPC = "grpc"
)

// SenderOptions say where and how to send.
type SenderOptions struct {
	// Protocol is ProtocolHTTP (OTLP/HTTP protobuf) or ProtocolGRPC.
	Protocol string
	// Endpoint is the collector's host:port for that protocol (loopback).
	Endpoint string
	// Gzip compresses request bodies, as SDKs configured for it do. It costs the sender CPU.
	Gzip bool
	// Timeout bounds each request; default 30s.
	Timeout time.Duration
	// Connections is the number of connections to keep open (HTTP); default 8.
	Connections int
}

// NewSender returns a sender for the protocol. The endpoint must be a loopback address: the
// testbed sends nowhere else.
func NewSender(opts SenderOptions) (Sender, error) {
	host, _, err := net.SplitHostPort(opts.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("loadgen: endpoint %q: %w", opts.Endpoint, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("loadgen: endpoint %q is not a loopback address", opts.Endpoint)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Connections <= 0 {
		opts.Connections = 8
	}
	switch opts.Protocol {
	case ProtocolHTTP, "":
		return newHTTPSender(opts), nil
	case ProtocolGRPC:
		return newGRPCSender(opts)
	default:
		return nil, fmt.Errorf("unknown protocol %q (use %s or %s)", opts.Protocol, ProtocolHTTP, ProtocolGRPC)
	}
}

type httpSender struct {
	url     string
	gzip    bool
	timeout time.Duration
	client  *http.Client
}

func newHTTPSender(opts SenderOptions) *httpSender {
	return &httpSender{
		url:     "http://" + opts.Endpoint + "/v1/traces",
		gzip:    opts.Gzip,
		timeout: opts.Timeout,
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConns:        opts.Connections,
			MaxIdleConnsPerHost: opts.Connections,
			IdleConnTimeout:     time.Minute,
		}},
	}
}

func (s *httpSender) Send(ctx context.Context, body []byte) Outcome {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if s.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return Outcome{Verdict: Failed, Status: err.Error()}
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if s.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Outcome{Verdict: Failed, Status: err.Error()}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	out := Outcome{Status: strconv.Itoa(resp.StatusCode), RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	switch {
	case resp.StatusCode == http.StatusOK:
		out.Verdict = Accepted
		if err == nil {
			out.RejectedSpans = partialRejects(answer)
		}
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		out.Verdict = Refused
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		out.Verdict = Rejected
	default:
		out.Verdict = Failed
	}
	return out
}

func (s *httpSender) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// retryAfter reads a Retry-After header given in seconds (the form collectors use).
func retryAfter(h string) time.Duration {
	if n, err := strconv.Atoi(h); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}

func partialRejects(answer []byte) int64 {
	var resp coltracepb.ExportTraceServiceResponse
	if proto.Unmarshal(answer, &resp) != nil {
		return 0
	}
	return resp.GetPartialSuccess().GetRejectedSpans()
}

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

type grpcSender struct {
	conn    *grpc.ClientConn
	timeout time.Duration
	gzip    bool
}

func newGRPCSender(opts SenderOptions) (*grpcSender, error) {
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
	}
	conn, err := grpc.NewClient("passthrough:///"+opts.Endpoint, dialOpts...)
	if err != nil {
		return nil, err
	}
	return &grpcSender{conn: conn, timeout: opts.Timeout, gzip: opts.Gzip}, nil
}

func (s *grpcSender) Send(ctx context.Context, body []byte) Outcome {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var callOpts []grpc.CallOption
	if s.gzip {
		callOpts = append(callOpts, grpc.UseCompressor("gzip"))
	}
	var answer []byte
	err := s.conn.Invoke(ctx, exportMethod, body, &answer, callOpts...)
	if err == nil {
		return Outcome{Verdict: Accepted, Status: codes.OK.String(), RejectedSpans: partialRejects(answer)}
	}
	st, ok := status.FromError(err)
	if !ok {
		return Outcome{Verdict: Failed, Status: err.Error()}
	}
	out := Outcome{Status: st.Code().String()}
	// The OTLP specification's split: RESOURCE_EXHAUSTED and UNAVAILABLE ask the sender to
	// back off; the other retryable codes leave it unknown whether the data was taken; every
	// other code drops the data for good (a malformed request gets INTERNAL from grpc-go's
	// decoder, for instance).
	switch st.Code() {
	case codes.ResourceExhausted, codes.Unavailable:
		out.Verdict = Refused
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.DataLoss:
		out.Verdict = Failed
	default:
		out.Verdict = Rejected
	}
	return out
}

func (s *grpcSender) Close() error { return s.conn.Close() }

// rawCodec sends bytes that are already protobuf and hands back the answer's bytes, so that
// the sender does not decode and re-encode what the workload encoded once.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, errors.New("rawCodec: want []byte")
	}
	return b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return errors.New("rawCodec: want *[]byte")
	}
	*p = append((*p)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }
