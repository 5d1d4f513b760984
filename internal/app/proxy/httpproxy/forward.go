package httpproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/fips-go/fips-go/internal/app/http1"
	"github.com/fips-go/fips-go/internal/app/proxy"
)

// Plain requests go one to an upstream connection, which we ask to close
// after the response: no pool of idle upstream connections to bound and
// expire, and no response can be matched to the wrong request. Client
// connections are kept alive when the response's framing allows.

const (
	copyBufSize = 16 << 10
	// maxInterim bounds the 1xx responses skipped before the final one.
	maxInterim = 8
)

// forward sends req upstream and the response back. It reports whether
// the client connection can carry another request.
func (s *Server) forward(ctx context.Context, cc *clientConn, req *request) bool {
	t, host, err := parseAbsolute(req.Target)
	if err == nil && !http1.IsFieldText(host) {
		err = fmt.Errorf("%w: bad host %q", ErrBadTarget, host)
	}
	if err != nil {
		cc.fail(400, err.Error())
		return false
	}
	in, err := requestFraming(req)
	if err != nil {
		if errors.Is(err, http1.ErrUnsupported) {
			cc.fail(501, err.Error())
		} else {
			cc.fail(400, err.Error())
		}
		return false
	}
	up, err := s.dial(ctx, t)
	if err != nil {
		s.opts.Logf("http: %s %v: %v", req.Method, t, err)
		cc.fail(502, err.Error())
		return false
	}
	defer up.Close()
	defer context.AfterFunc(ctx, func() { up.Close() })()
	ut := &timedConn{Conn: up, idle: s.opts.IdleTimeout}
	buf := make([]byte, copyBufSize)

	// We answer "Expect: 100-continue" ourselves: the client waits for
	// it before sending the body, which we read before the response.
	if in.kind != bodyNone && req.Minor == 1 && req.Header.HasToken("Expect", "100-continue") {
		req.Header.Del("Expect")
		cc.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if cc.bw.Flush() != nil {
			return false
		}
	}
	sent, err := sendRequest(ut, req, host, in, cc.br, buf)
	if err != nil {
		s.opts.Logf("http: %s %v: reading the request body: %v", req.Method, t, err)
		if errors.Is(err, http1.ErrMalformed) || errors.Is(err, http1.ErrTooLarge) {
			cc.fail(400, "request body: "+err.Error())
		} else {
			cc.abort()
		}
		return false
	}
	resp, err := readResponse(bufio.NewReaderSize(ut, copyBufSize), req.Method)
	if err != nil {
		if sent != nil {
			err = sent
		}
		s.opts.Logf("http: %s %v: %v", req.Method, t, err)
		cc.fail(502, err.Error())
		return false
	}
	keep := sent == nil && req.Minor == 1 && !req.Header.HasToken("Connection", "close") &&
		!req.Header.HasToken("Proxy-Connection", "close")
	keep = s.sendResponse(cc, req, resp, keep, buf)
	if sent != nil {
		// The client's body may be partly unread: closing now would
		// reset the connection and could lose the response on its way.
		proxy.CloseGently(cc.raw)
	}
	return keep
}

// sendRequest sends the request head and body upstream, reading the
// body from the client's br. An error reading the client is returned as
// err; one writing upstream as sent, for the response may be there
// anyway (a server can answer before reading the whole body).
func sendRequest(up net.Conn, req *request, host string, in framing, br *bufio.Reader, buf []byte) (sent, err error) {
	h := Header{{Name: "Host", Value: host}}
	fields := req.Header.Clone()
	RemoveHopByHop(&fields)
	fields.Del("Host")
	fields.Del("Content-Length")
	h = append(h, fields...)
	var src io.Reader
	switch in.kind {
	case bodyLength:
		h.Add("Content-Length", strconv.FormatInt(in.n, 10))
		src = &lengthReader{r: br, n: in.n}
	case bodyChunked:
		h.Add("Transfer-Encoding", "chunked")
		src = &chunkedReader{br: br}
	}
	h.Add("Connection", "close")
	bw := bufio.NewWriterSize(up, 4<<10)
	bw.Write(http1.AppendRequestHead(nil, req.Method, originForm(req.Target), h))
	if src == nil {
		return bw.Flush(), nil
	}
	rerr, werr := relay(bw, src, buf, in.kind == bodyChunked)
	if rerr != nil {
		return nil, rerr
	}
	if werr == nil && in.kind == bodyChunked {
		bw.WriteString(lastChunk)
		werr = bw.Flush()
	}
	return werr, nil
}

// readResponse reads the final response head, skipping interim (1xx)
// ones: we sent no Expect and no Upgrade, so they carry nothing the
// client asked for.
func readResponse(br *bufio.Reader, method string) (*upstreamResponse, error) {
	for range maxInterim {
		head, err := http1.ReadHead(br, maxHeaderBytes)
		if err != nil {
			return nil, fmt.Errorf("reading the response: %w", err)
		}
		resp, err := http1.ParseResponse(head)
		if err != nil {
			return nil, err
		}
		if resp.Status == 101 {
			return nil, fmt.Errorf("%w: 101 Switching Protocols unasked", http1.ErrMalformed)
		}
		if resp.Status < 200 {
			continue
		}
		fr, err := responseFraming(method, resp.Status, resp.Header)
		if err != nil {
			return nil, err
		}
		return &upstreamResponse{response: resp, body: fr, br: br}, nil
	}
	return nil, fmt.Errorf("%w: over %d interim responses", http1.ErrMalformed, maxInterim)
}

// upstreamResponse is a final response with its body still to read.
type upstreamResponse struct {
	*response
	body framing
	br   *bufio.Reader
}

// sendResponse passes resp on to the client. keep is whether the client
// connection could stay open; the result is whether it can, the body
// allowing. A body that breaks off aborts the client connection so that
// the client cannot take it for whole.
func (s *Server) sendResponse(cc *clientConn, req *request, resp *upstreamResponse, keep bool, buf []byte) bool {
	h := resp.Header.Clone()
	RemoveHopByHop(&h)
	var src io.Reader
	chunk := false
	switch resp.body.kind {
	case bodyNone:
		if _, _, err := http1.ContentLength(h); err != nil {
			h.Del("Content-Length")
		}
	case bodyLength:
		h.Set("Content-Length", strconv.FormatInt(resp.body.n, 10))
		src = &lengthReader{r: resp.br, n: resp.body.n}
	case bodyChunked:
		h.Del("Content-Length")
		src = &chunkedReader{br: resp.br}
		// An HTTP/1.0 client knows no chunks: it reads until close.
		if chunk = req.Minor == 1; chunk {
			h.Add("Transfer-Encoding", "chunked")
		} else {
			keep = false
		}
	case bodyUntilClose:
		h.Del("Content-Length")
		src = resp.br
		keep = false
	}
	if !keep {
		h.Add("Connection", "close")
	}
	cc.bw.Write(http1.AppendResponseHead(nil, resp.Status, resp.Reason, h))
	if src == nil {
		return cc.bw.Flush() == nil && keep
	}
	rerr, werr := relay(cc.bw, src, buf, chunk)
	switch {
	case rerr != nil:
		s.opts.Logf("http: %s %s: response body: %v", req.Method, req.Target, rerr)
		cc.abort()
		return false
	case werr != nil:
		return false
	case chunk:
		cc.bw.WriteString(lastChunk)
	}
	return cc.bw.Flush() == nil && keep
}

// relay copies src to dst until src ends, as chunks if chunk is set,
// flushing after each read so that a streamed body is not held back. It
// returns the first error of each side; src ending (io.EOF) is none.
func relay(dst *bufio.Writer, src io.Reader, buf []byte, chunk bool) (rerr, werr error) {
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if chunk {
				werr = writeChunk(dst, buf[:n])
			} else {
				_, werr = dst.Write(buf[:n])
			}
			if werr == nil {
				werr = dst.Flush()
			}
			if werr != nil {
				return nil, werr
			}
		}
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return err, nil
		}
	}
}
