package svcidguardextension // import "github.com/svc/svc-collector/svcidguardextension"

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"strconv"

	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

const (
	contentTypeProtobuf = "application/x-protobuf"
	contentTypeJSON     = "application/json"
)

var _ extensionmiddleware.HTTPServer = (*guard)(nil)

// GetHTTPHandler wraps the receiver's HTTP handler. The collector's HTTP server runs it after
// authentication and decompression, so the body is the OTLP request as sent.
func (g *guard) GetHTTPHandler(context.Context) (extensionmiddleware.WrapHTTPHandlerFunc, error) {
	return func(_ context.Context, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serveHTTP(w, r, next) }), nil
	}, nil
}

func (g *guard) serveHTTP(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if r.Method != http.MethodPost || r.URL.Path != g.cfg.TracesPath {
		next.ServeHTTP(w, r)
		return
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != contentTypeProtobuf && mt != contentTypeJSON {
		next.ServeHTTP(w, r) // the receiver answers what it answers to an unknown content type
		return
	}
	body, err := readBody(r)
	if err != nil {
		// Too large, or the client went away: the receiver reads the same error and answers it.
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		next.ServeHTTP(w, r)
		return
	}
	pass := func() {
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	}
	if mt == contentTypeProtobuf && !hasInvalidSpan(body) {
		pass() // the common request: every id is set
		return
	}
	req := ptraceotlp.NewExportRequest()
	if mt == contentTypeProtobuf {
		err = req.UnmarshalProto(body)
	} else {
		err = req.UnmarshalJSON(body)
	}
	if err != nil {
		pass() // not OTLP: the receiver refuses it with its own message
		return
	}
	refused := removeInvalidSpans(req.Traces())
	if refused.total() == 0 {
		pass()
		return
	}
	g.report(r.Context(), refused)

	var kept []byte
	if mt == contentTypeProtobuf {
		kept, err = req.MarshalProto()
	} else {
		kept, err = req.MarshalJSON()
	}
	if err != nil {
		http.Error(w, "svc gateway: cannot re-encode the request: "+err.Error(), http.StatusInternalServerError)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(kept))
	r.ContentLength = int64(len(kept))
	r.Header.Set("Content-Length", strconv.Itoa(len(kept)))
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(rec, r)
	if rec.status != http.StatusOK {
		rec.copyTo(w, rec.body.Bytes()) // nothing was accepted: the sender retries the whole request
		return
	}
	out, err := withPartialSuccess(rec.body.Bytes(), rec.header.Get("Content-Type"), refused)
	if err != nil {
		out = rec.body.Bytes()
	}
	rec.copyTo(w, out)
}

// maxBodyAhead bounds the buffer made for a body before reading it, from its Content-Length: a
// sender's claim is not trusted beyond it, so requests that claim large bodies and send nothing
// hold little memory (larger bodies grow from there; the server's body limit applies while reading).
const maxBodyAhead = 4 << 20

// readBody reads r's body whole into one buffer sized from Content-Length when the sender gave it,
// instead of io.ReadAll's slice grown from 512 bytes: the growth (allocations, zeroing, copies)
// showed as a twelfth of a saturated gateway's CPU. The body is not pooled for reuse: bodies of
// megabytes held between requests would show in the gateway's memory.
func readBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 {
		buf.Grow(int(min(n, maxBodyAhead)) + bytes.MinRead) // + MinRead: ReadFrom meets EOF without growing
	}
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

// withPartialSuccess adds the refused spans to the receiver's OTLP answer (in its encoding).
func withPartialSuccess(answer []byte, contentType string, refused *refusals) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	resp := ptraceotlp.NewExportResponse()
	var err error
	if mt == contentTypeJSON {
		err = resp.UnmarshalJSON(answer)
	} else {
		err = resp.UnmarshalProto(answer)
	}
	if err != nil {
		return nil, err
	}
	addRefused(resp, refused)
	if mt == contentTypeJSON {
		return resp.MarshalJSON()
	}
	return resp.MarshalProto()
}

// addRefused adds the refused spans to an answer's partial success.
func addRefused(resp ptraceotlp.ExportResponse, refused *refusals) {
	ps := resp.PartialSuccess()
	ps.SetRejectedSpans(ps.RejectedSpans() + refused.total())
	msg := refused.message()
	if prev := ps.ErrorMessage(); prev != "" {
		msg = prev + "; " + msg
	}
	ps.SetErrorMessage(msg)
}

// recorder keeps the receiver's answer so that the partial success can be added to it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rec *recorder) Header() http.Header         { return rec.header }
func (rec *recorder) Write(b []byte) (int, error) { return rec.body.Write(b) }
func (rec *recorder) WriteHeader(status int)      { rec.status = status }

func (rec *recorder) copyTo(w http.ResponseWriter, body []byte) {
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.status)
	_, _ = w.Write(body)
}

type readCloser struct {
	io.Reader
	io.Closer
}
