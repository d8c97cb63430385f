package svcidguardextension // import "github.com/svc/svc-collector/svcidguardextension"

import (
	"context"

	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// traceExportMethod is the OTLP/gRPC trace export.
const traceExportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

var _ extensionmiddleware.GRPCServer = (*guard)(nil)

// protoMessage is how the OTLP request and answer messages of the collector's gRPC server
// read and write themselves as protobuf (methods of pdata's generated messages).
type protoMessage interface {
	Reset()
	SizeProto() int
	MarshalProto(buf []byte) int
	UnmarshalProto(buf []byte) error
}

// GetGRPCServerOptions adds the guard to the receiver's gRPC server as a unary interceptor.
func (g *guard) GetGRPCServerOptions(context.Context) ([]grpc.ServerOption, error) {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.unary)}, nil
}

func (g *guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m, ok := req.(protoMessage)
	if info.FullMethod != traceExportMethod || !ok {
		return handler(ctx, req)
	}
	body := encode(m)
	if !hasInvalidSpan(body) {
		return handler(ctx, req)
	}
	er := ptraceotlp.NewExportRequest()
	if er.UnmarshalProto(body) != nil {
		return handler(ctx, req)
	}
	refused := removeInvalidSpans(er.Traces())
	if refused.total() == 0 {
		return handler(ctx, req)
	}
	g.report(ctx, refused)
	kept, err := er.MarshalProto()
	if err == nil {
		m.Reset()
		err = m.UnmarshalProto(kept)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "svc gateway: cannot rewrite the request: %v", err)
	}
	resp, err := handler(ctx, req)
	if err != nil {
		return resp, err // nothing was accepted: the sender retries the whole request
	}
	if rm, ok := resp.(protoMessage); ok {
		answer := ptraceotlp.NewExportResponse()
		if answer.UnmarshalProto(encode(rm)) == nil {
			addRefused(answer, refused)
			if out, err := answer.MarshalProto(); err == nil {
				rm.Reset()
				_ = rm.UnmarshalProto(out)
			}
		}
	}
	return resp, nil
}

func encode(m protoMessage) []byte {
	buf := make([]byte, m.SizeProto())
	m.MarshalProto(buf)
	return buf
}
