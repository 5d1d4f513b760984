package ipctest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/ipc"
)

// replyTimeout bounds the wait for a reply, so a server that never answers
// fails the test instead of hanging it. It is a safety net, not a timing
// assertion.
const replyTimeout = 10 * time.Second

// RunBadRequests serves h on a real UAPI socket, configures it with Seed,
// then sends each of BadRequests on its own connection and checks that the
// reply carries the expected negative errno, that the get=1 output of
// h.Status() is byte for byte what it was before, and that the server still
// answers get=1 afterwards. h must not change on its own meanwhile (no
// traffic, no handshakes).
func RunBadRequests(t *testing.T, h ipc.Handler) {
	t.Helper()
	RunRequests(t, h, BadRequests)
}

// RunRequests is RunBadRequests with the given requests, and after Seed
// the further seed requests given.
func RunRequests(t *testing.T, h ipc.Handler, reqs []BadRequest, seeds ...string) {
	t.Helper()
	l := serve(t, h)
	if errno := send(t, l.Path(), Seed, false); errno != 0 {
		t.Fatalf("seed configuration refused: errno %d", errno)
	}
	for _, seed := range seeds {
		if errno := send(t, l.Path(), seed, false); errno != 0 {
			t.Fatalf("seed %q refused: errno %d", seed, errno)
		}
	}
	for _, br := range reqs {
		t.Run(br.Name, func(t *testing.T) {
			before := snapshot(t, h)
			errno := send(t, l.Path(), br.Request, br.HalfClose)
			if errno >= 0 || errno != br.Errno {
				t.Errorf("errno %d, want %d", errno, br.Errno)
			}
			if after := snapshot(t, h); !bytes.Equal(before, after) {
				t.Errorf("a refused request changed the device:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			c, err := net.Dial("unix", l.Path())
			if err != nil {
				t.Fatalf("server gone after the request: %v", err)
			}
			defer c.Close()
			if _, err := ipc.NewClient(c).Get(); err != nil {
				t.Errorf("get=1 after the request: %v", err)
			}
		})
	}
}

// serve starts a Listener in a fresh short directory (socket paths are
// limited to about 100 bytes, which t.TempDir can exceed) and stops it when
// the test ends.
func serve(t *testing.T, h ipc.Handler) *ipc.Listener {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipctest")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ipc.Listen(dir, "bad0")
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Serve(h, ipc.ServeOptions{MaxRequest: MaxRequest}) }()
	t.Cleanup(func() {
		l.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		os.RemoveAll(dir)
	})
	return l
}

func snapshot(t *testing.T, h ipc.Handler) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := ipc.WriteGet(&b, h.Status()); err != nil {
		t.Fatalf("WriteGet: %v", err)
	}
	return b.Bytes()
}

// send writes req on a new connection and returns the errno of the reply.
// The write runs in its own goroutine because the server may stop reading
// an oversized request and answer before the client has finished sending.
func send(t *testing.T, path, req string, halfClose bool) int64 {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(replyTimeout))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := io.WriteString(c, req); err == nil && halfClose {
			c.(*net.UnixConn).CloseWrite()
		}
	}()
	defer func() { <-wrote }()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	v, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "errno=")
	if !ok {
		t.Fatalf("reply %q is not an errno line", line)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("reply %q: %v", line, err)
	}
	return n
}
