package platform

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// Media types the platform takes.
const (
	contentTypeProtobuf = "application/x-protobuf"
	contentTypeJSON     = "application/json"
)

// drainLimit bounds how much of a rejected body is read so the client sees the answer.
const drainLimit = 256 << 20

// httpError is a rejection: the status and the message of the JSON error body.
type httpError struct {
	status  int
	message string
}

func (e *httpError) write(w http.ResponseWriter) { writeError(w, e.status, e.message) }

func errorf(status int, format string, args ...any) *httpError {
	return &httpError{status: status, message: fmt.Sprintf(format, args...)}
}

// mediaType is the request's Content-Type without parameters, lower-cased; 415 when it is
// missing or not one of allowed.
func mediaType(r *http.Request, allowed ...string) (string, *httpError) {
	header := r.Header.Get("Content-Type")
	if header == "" {
		return "", errorf(http.StatusUnsupportedMediaType, "missing Content-Type; use %s", strings.Join(allowed, " or "))
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return "", errorf(http.StatusUnsupportedMediaType, "malformed Content-Type %q", header)
	}
	for _, a := range allowed {
		if mt == a {
			return mt, nil
		}
	}
	return "", errorf(http.StatusUnsupportedMediaType, "unsupported Content-Type %q; use %s", mt, strings.Join(allowed, " or "))
}

// readBody reads the body and undoes its Content-Encoding (identity or gzip), within the
// limits of the platform and of the fault in force:
//   - Fault.MaxBodyBytes bounds the body as sent (compressed when gzip), as a proxy in front of
//     the platform would;
//   - Fault.MaxDecompressedBytes bounds it after decompression, whatever the encoding;
//   - Options.MaxBodyBytes bounds both.
//
// Either limit exceeded gives 413. An unknown encoding gives 415, a corrupt gzip stream 400.
func (p *Platform) readBody(r *http.Request, x *exchange) ([]byte, *httpError) {
	encoding := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	gzipped := false
	switch encoding {
	case "", "identity":
	case "gzip":
		gzipped = true
	default:
		drainBody(r)
		return nil, errorf(http.StatusUnsupportedMediaType, "unsupported Content-Encoding %q; use gzip or none", encoding)
	}
	x.record.Gzip = gzipped

	wireLimit := tighter(p.opts.MaxBodyBytes, x.fault.MaxBodyBytes)
	raw, err := io.ReadAll(io.LimitReader(r.Body, wireLimit+1))
	x.record.BodyBytes = int64(len(raw))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "cannot read body: %v", err)
	}
	if int64(len(raw)) > wireLimit {
		drainBody(r)
		return nil, errorf(http.StatusRequestEntityTooLarge, "body exceeds %d bytes as sent", wireLimit)
	}

	decodedLimit := tighter(p.opts.MaxBodyBytes, x.fault.MaxDecompressedBytes)
	decoded := raw
	if gzipped {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "Content-Encoding is gzip but the body is not gzip: %v", err)
		}
		decoded, err = io.ReadAll(io.LimitReader(zr, decodedLimit+1))
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "corrupt gzip body: %v", err)
		}
	}
	x.record.DecodedBytes = int64(len(decoded))
	if int64(len(decoded)) > decodedLimit {
		return nil, errorf(http.StatusRequestEntityTooLarge, "body exceeds %d bytes after decompression", decodedLimit)
	}
	return decoded, nil
}

// tighter is the smaller of the platform limit and a fault's limit (0: no fault limit).
func tighter(limit, faultLimit int64) int64 {
	if faultLimit > 0 && faultLimit < limit {
		return faultLimit
	}
	return limit
}

func drainBody(r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, drainLimit))
}
