package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"encoding/binary"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/writepath"
)

// requestClass is the write path class of a span request (write_path: auto), set when the
// pipeline's spans become a request (spansRequestFromTraces), where the client's headers are
// known, and kept by the queue (spans_queue.go), the batcher (one partition per class:
// classPartitioner; MergeSplit's pieces keep it) and the retry (OnError).
type requestClass uint8

const (
	// classNone: not classified (write_path always or never, where the header does not depend on
	// it). A push under auto sends it as classStaged.
	classNone requestClass = iota
	// classDirect: every span Direct; the request carries x-svc-ingestion-version: 4.
	classDirect
	// classStaged: every span Staged; the request goes without it. Also the class of span
	// batches queued by a release that did not record one: sent as they were then.
	classStaged
	// classMixed: both. pushSpans sends its Staged and its Direct spans in requests of their own,
	// telling them apart again by scope (a request is mixed only when no client header decided).
	classMixed
)

// classOf classifies the spans of td, sent by the client of ctx. A batch of one class (the common
// case) is neither copied nor reordered; this reads each scope once and allocates nothing per span.
func classOf(ctx context.Context, td ptrace.Traces) requestClass {
	c := clientHeaders(ctx)
	if class, ok := c.Decided(); ok {
		return classFor(class)
	}
	return classOfScopes(c, td)
}

// classOfScopes classifies td by its scopes (c decides nothing).
func classOfScopes(c writepath.Client, td ptrace.Traces) requestClass {
	class := classNone
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			if ss.Spans().Len() == 0 {
				continue
			}
			switch scope := classFor(c.Classify(rs.Resource(), ss.Scope())); class {
			case classNone:
				class = scope
			case scope:
			default:
				return classMixed
			}
		}
	}
	if class == classNone { // no span: nothing to send
		return classDirect
	}
	return class
}

func classFor(c writepath.Class) requestClass {
	if c == writepath.Direct {
		return classDirect
	}
	return classStaged
}

// clientHeaders reads the SDK headers the client sent, when the receiver passes them on as client
// metadata (include_metadata). The platform reads them with `-` or `_`; so does this.
func clientHeaders(ctx context.Context) writepath.Client {
	md := client.FromContext(ctx).Metadata
	return writepath.FromHeaders(
		firstValue(md, writepath.HeaderSDKName, "x_svc_sdk_name"),
		firstValue(md, writepath.HeaderSDKVersion, "x_svc_sdk_version"),
		firstValue(md, writepath.HeaderIngestionVersion, "x_svc_ingestion_version"))
}

func firstValue(md client.Metadata, keys ...string) string {
	for _, k := range keys {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// stagedFirst returns the references of td's spans, its Staged spans first, and how many those
// are: the spans of a mixed request in the order pushSpans sends them, each class a range of its
// own. Scopes are classified without client headers (none decided a mixed request).
func stagedFirst(td ptrace.Traces) ([]spanRef, int) {
	refs := make([]spanRef, 0, td.SpanCount())
	var direct []spanRef
	var c writepath.Client
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			staged := c.Classify(rs.Resource(), ss.Scope()) == writepath.Staged
			for k := 0; k < ss.Spans().Len(); k++ {
				if staged {
					refs = append(refs, spanRef{i, j, k})
				} else {
					direct = append(direct, spanRef{i, j, k})
				}
			}
		}
	}
	return append(refs, direct...), len(refs)
}

// wirePath is what a span request tells the platform about its write path, and the value of the
// write_path attribute of exporter_svc_span_requests_accepted.
type wirePath uint8

const (
	wireDirect   wirePath = iota // x-svc-ingestion-version: 4
	wireStaged                   // no header: spans the platform keeps staged
	wirePlatform                 // no header, write_path never: the platform's rules decide
	numWirePaths
)

func (p wirePath) String() string {
	return [...]string{"direct", "staged", "platform"}[p]
}

// wirePathOf is the path of a request of class under the configured mode.
func wirePathOf(mode WritePath, class requestClass) wirePath {
	switch mode {
	case WritePathAlways:
		return wireDirect
	case WritePathNever:
		return wirePlatform
	}
	if class == classDirect {
		return wireDirect
	}
	return wireStaged
}

// classPartitioner keeps the batches of sending_queue.batch apart by class, beside the client
// metadata keys of batch::partition::metadata_keys (and the credentials in pass-through mode),
// which it partitions by exactly as exporterhelper v0.164 does (internal/queuebatch/
// metadata_partitioner.go, Apache-2.0): exporterhelper takes either its own metadata partitioner
// or one of the exporter's, so this one does both.
type classPartitioner struct{ keys []string }

func (p classPartitioner) GetKey(ctx context.Context, req xexporterhelper.Request) string {
	class := classNone
	if r, ok := req.(*spansRequest); ok {
		class = r.class
	}
	kb := make([]byte, 1, 64)
	kb[0] = byte(class)
	if len(p.keys) == 0 {
		return string(kb)
	}
	meta := client.FromContext(ctx).Metadata
	for _, k := range p.keys {
		values := meta.Get(k)
		kb = binary.AppendUvarint(kb, uint64(len(values)))
		for _, val := range values {
			kb = binary.AppendUvarint(kb, uint64(len(val)))
			kb = append(kb, val...)
		}
	}
	return string(kb)
}

// metadataMergeCtx is the context of a merged batch: the partition's metadata keys, as exporterhelper
// v0.164 makes it (NewMetadataKeysMergeCtx); nil without keys (the batcher then uses none).
func metadataMergeCtx(keys []string) func(context.Context, context.Context) context.Context {
	if len(keys) == 0 {
		return nil
	}
	return func(ctx1, _ context.Context) context.Context {
		m1 := client.FromContext(ctx1).Metadata
		m := make(map[string][]string, len(keys))
		for _, key := range keys {
			if v1 := m1.Get(key); len(v1) > 0 {
				m[key] = v1
			}
		}
		return client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(m)})
	}
}
