package ipc_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/ipc"
)

// safety bounds waits that must end; passing tests never come near it.
const safety = 10 * time.Second

// shortDir is a temporary directory with a path short enough for a unix
// socket name (t.TempDir can exceed the ~100-byte limit).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startServer listens in a fresh directory and serves h until the test ends.
func startServer(t *testing.T, h ipc.Handler, opts ipc.ServeOptions) (*ipc.Listener, string) {
	t.Helper()
	dir := shortDir(t)
	l, err := ipc.Listen(dir, "wg0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Serve(h, opts) }()
	t.Cleanup(func() {
		l.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(safety):
			t.Error("Serve did not return after Close")
		}
	})
	return l, dir
}

func dial(t *testing.T, dir string) *ipc.Client {
	t.Helper()
	c, err := ipc.Dial(dir, "wg0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestListenSocketMode(t *testing.T) {
	dir := filepath.Join(shortDir(t), "run", "wireguard")
	l, err := ipc.Listen(dir, "wg0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Lstat(filepath.Join(dir, "wg0.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the socket (temporary names cleaned up)", len(entries))
	}
}

func TestListenStaleSocketReplaced(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "wg0.sock")
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close() // the file stays, nobody answers: what a crashed daemon leaves
	if _, err := os.Lstat(path); err != nil {
		t.Fatal(err)
	}
	h := &mapHandler{}
	l, err := ipc.Listen(dir, "wg0")
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	defer l.Close()
	go l.Serve(h, ipc.ServeOptions{})
	if _, err := dial(t, dir).Get(); err != nil {
		t.Fatal(err)
	}
}

func TestListenLiveSocketRefused(t *testing.T) {
	l, dir := startServer(t, &mapHandler{}, ipc.ServeOptions{})
	if l2, err := ipc.Listen(dir, "wg0"); !errors.Is(err, ipc.ErrInUse) {
		if l2 != nil {
			l2.Close()
		}
		t.Fatalf("second Listen: %v, want ErrInUse", err)
	}
	if _, err := dial(t, dir).Get(); err != nil {
		t.Fatalf("first server disturbed: %v", err)
	}
	select {
	case <-l.Removed():
		t.Fatal("Removed fired for the live socket")
	default:
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "wg0.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ipc.Listen(dir, "wg0"); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("the file was touched")
	}
}

func TestListenBadNames(t *testing.T) {
	dir := shortDir(t)
	for _, name := range []string{"", "../x", "a/b", ".", "..", "0123456789abcdef", "wg 0"} {
		if l, err := ipc.Listen(dir, name); err == nil {
			l.Close()
			t.Errorf("Listen(%q) succeeded", name)
		}
		if _, err := ipc.Dial(dir, name); err == nil {
			t.Errorf("Dial(%q) succeeded", name)
		}
	}
}

func waitRemoved(t *testing.T, l *ipc.Listener) {
	t.Helper()
	select {
	case <-l.Removed():
	case <-time.After(safety):
		t.Fatal("Removed did not fire")
	}
}

func TestRemovedOnDelete(t *testing.T) {
	l, err := ipc.Listen(shortDir(t), "wg0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Remove(l.Path()); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, l)
}

func TestRemovedOnReplace(t *testing.T) {
	dir := shortDir(t)
	l, err := ipc.Listen(dir, "wg0")
	if err != nil {
		t.Fatal(err)
	}
	// Another socket renamed over ours: same name, different file.
	other := filepath.Join(dir, "other.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: other, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.SetUnlinkOnClose(false)
	if err := os.Rename(other, l.Path()); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, l)
	// Close must not remove the file that is not ours.
	l.Close()
	if _, err := os.Lstat(l.Path()); err != nil {
		t.Fatalf("Close removed the replacement socket: %v", err)
	}
}

func TestCloseRemovesFileWithoutFiringRemoved(t *testing.T) {
	l, err := ipc.Listen(shortDir(t), "wg0")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(l.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket file still there after Close: %v", err)
	}
	select {
	case <-l.Removed():
		t.Fatal("Close fired Removed")
	default:
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := l.Serve(&mapHandler{}, ipc.ServeOptions{}); err != nil {
		t.Fatalf("Serve after Close: %v, want nil", err)
	}
}

// TestDetachFileListener is the daemon hand-over: the parent creates the
// socket, passes the descriptor on, and the child serves it.
func TestDetachFileListener(t *testing.T) {
	dir := shortDir(t)
	parent, err := ipc.Listen(dir, "wg0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parent.Detach()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(parent.Path()); err != nil {
		t.Fatalf("Detach removed the socket file: %v", err)
	}
	child, err := ipc.FileListener(f, parent.Path())
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	h := &mapHandler{}
	done := make(chan error, 1)
	go func() { done <- child.Serve(h, ipc.ServeOptions{}) }()
	c := dial(t, dir)
	if err := c.Set(&device.Config{ListenPort: ptr(uint16(9))}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Get(); err != nil || st.ListenPort != 9 {
		t.Fatalf("Get: %+v, %v", st, err)
	}
	os.Remove(child.Path())
	waitRemoved(t, child)
	child.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestFileListenerRejectsNonListener(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := ipc.FileListener(f, "/nonexistent.sock"); err == nil {
		t.Fatal("FileListener accepted /dev/null")
	}
}

// TestOneConnectionManyRequests: a connection carries requests in turn,
// including after a refused one.
func TestOneConnectionManyRequests(t *testing.T) {
	h := &mapHandler{st: device.Status{Counters: []device.Counter{{Name: "x", Value: 1}}}}
	_, dir := startServer(t, h, ipc.ServeOptions{})
	c := dial(t, dir)
	cfg := &device.Config{
		PrivateKey: ptr(noise.PrivateKey(key(1))),
		Peers:      []device.PeerConfig{{PublicKey: key(2), ReplaceAllowedIPs: true}},
	}
	if err := c.Set(cfg); err != nil {
		t.Fatal(err)
	}
	bad := &device.Config{Peers: []device.PeerConfig{{PublicKey: key(3), ProtocolVersion: ptr(1)}}}
	h.mu.Lock()
	h.applyErr = fmt.Errorf("bind: %w", syscall.EADDRINUSE)
	h.mu.Unlock()
	err := c.Set(bad)
	var ie *ipc.Error
	if !errors.As(err, &ie) || ie.Errno != ipc.ErrnoAddrInUse || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("refused Set: %v, want errno %d", err, ipc.ErrnoAddrInUse)
	}
	h.mu.Lock()
	h.applyErr = nil
	h.mu.Unlock()
	st, err := c.Get()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Peers) != 1 || st.Peers[0].PublicKey != key(2) || st.PublicKey != cfg.PrivateKey.PublicKey() {
		t.Fatalf("Get after refused Set: %+v", st)
	}
	counters, err := c.Counters()
	if err != nil || !reflect.DeepEqual(counters, []device.Counter{{Name: "x", Value: 1}}) {
		t.Fatalf("Counters: %v, %v", counters, err)
	}
}

func TestGetRoundTrip(t *testing.T) {
	want := sampleStatus()
	want.Peers[1].LastHandshake = time.Unix(5, 0)
	h := &mapHandler{st: want}
	_, dir := startServer(t, h, ipc.ServeOptions{})
	got, err := dial(t, dir).Get()
	if err != nil {
		t.Fatal(err)
	}
	// Counters travel separately (get=fips), and times compare by instant.
	want.Counters = nil
	for i := range want.Peers {
		if !got.Peers[i].LastHandshake.Equal(want.Peers[i].LastHandshake) {
			t.Errorf("peer %d handshake %v, want %v", i, got.Peers[i].LastHandshake, want.Peers[i].LastHandshake)
		}
		got.Peers[i].LastHandshake, want.Peers[i].LastHandshake = time.Time{}, time.Time{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	// No handshake travels as 0/0 and comes back as the zero time.
	h.mu.Lock()
	h.st.Peers[1].LastHandshake = time.Time{}
	h.mu.Unlock()
	got, err = dial(t, dir).Get()
	if err != nil || !got.Peers[1].LastHandshake.IsZero() {
		t.Fatalf("zero handshake: %v, %v", got.Peers[1].LastHandshake, err)
	}
}

func TestCountersWithBadNameGiveEIO(t *testing.T) {
	h := &mapHandler{st: device.Status{Counters: []device.Counter{{Name: "bad name"}}}}
	_, dir := startServer(t, h, ipc.ServeOptions{})
	c := dial(t, dir)
	if _, err := c.Counters(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Counters: %v, want EIO", err)
	}
	if _, err := c.Get(); err != nil {
		t.Fatalf("connection unusable after a refused get=fips: %v", err)
	}
}

// rawExchange sends req on a new connection and returns everything the
// server sends until it closes the connection or the safety deadline.
func rawExchange(t *testing.T, path, req string) string {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(safety))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(c)
	// A reset is the server closing with part of our request unread.
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("server did not close the connection: %v (got %q)", err, out)
	}
	return string(out)
}

func TestProtocolErrorsCloseConnection(t *testing.T) {
	l, _ := startServer(t, &mapHandler{}, ipc.ServeOptions{})
	tests := []struct{ req, want string }{
		{"hello=1\nget=1\n\n", "errno=-22\n\n"},
		{"get=1\nx\nget=1\n\n", "errno=-22\n\n"},
		{"get=2\n\n", "errno=-22\n\n"},
		// An endless first line is cut off once it passes MaxLine.
		{strings.Repeat("g", 2*ipc.MaxLine+1), ""},
	}
	for _, tt := range tests {
		if got := rawExchange(t, l.Path(), tt.req); got != tt.want {
			t.Errorf("request %.20q: reply %q, want %q and the connection closed", tt.req, got, tt.want)
		}
	}
}

// TestPipelinedRequests: requests sent back to back without waiting are
// answered in order, a refused one included.
func TestPipelinedRequests(t *testing.T) {
	l, _ := startServer(t, &mapHandler{}, ipc.ServeOptions{})
	c, err := net.Dial("unix", l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(safety))
	io.WriteString(c, "set=1\nlisten_port=5\n\nset=1\nlisten_port=x\nfwmark=1\n\nget=1\n\n")
	br := bufio.NewReader(c)
	var lines []string
	for len(lines) < 3 || lines[len(lines)-1] != "errno=0" {
		s, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", lines, err)
		}
		if s = strings.TrimSuffix(s, "\n"); s != "" {
			lines = append(lines, s)
		}
	}
	want := []string{"errno=0", "errno=-22", "listen_port=5", "errno=0"}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("replies %q, want %q", lines, want)
	}
}

// TestStuckClientsDropped: a client that sends nothing, or stops halfway
// through a request, is hung up on once Timeout passes; the half-sent
// request is refused with -EIO and not applied.
func TestStuckClientsDropped(t *testing.T) {
	h := &mapHandler{}
	l, _ := startServer(t, h, ipc.ServeOptions{Timeout: 20 * time.Millisecond})
	for _, tt := range []struct{ req, want string }{
		{"", ""},
		{"set=1\nlisten_port=1\n", "errno=-5\n\n"},
	} {
		c, err := net.Dial("unix", l.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(safety))
		io.WriteString(c, tt.req) // and then nothing
		if out, err := io.ReadAll(c); err != nil || string(out) != tt.want {
			t.Fatalf("stuck client after %q: read %q, %v; want %q and the server to hang up", tt.req, out, err, tt.want)
		}
	}
	if st := h.Status(); st.ListenPort != 0 {
		t.Fatal("the half-sent request was applied")
	}
}

// TestMaxClients: with every slot held by an idle client, a further client
// waits; when one leaves, it is served.
func TestMaxClients(t *testing.T) {
	l, _ := startServer(t, &mapHandler{}, ipc.ServeOptions{MaxClients: 2})
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("unix", l.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A round trip proves this connection holds a slot.
		c.SetDeadline(time.Now().Add(safety))
		io.WriteString(c, "get=1\n\n")
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	c, err := net.Dial("unix", l.Path()) // queued in the backlog
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "get=1\n\n")
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a third client was served while two held both slots")
	}
	held[0].Close()
	c.SetReadDeadline(time.Now().Add(safety))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatalf("third client not served after a slot freed: %v", err)
	}
}

func TestConcurrentClients(t *testing.T) {
	h := &mapHandler{}
	_, dir := startServer(t, h, ipc.ServeOptions{})
	const clients, rounds = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := ipc.Dial(dir, "wg0")
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for r := 0; r < rounds; r++ {
				cfg := &device.Config{Peers: []device.PeerConfig{{PublicKey: key(byte(i)), PersistentKeepalive: ptr(uint16(r))}}}
				if err := c.Set(cfg); err != nil {
					errs <- err
					return
				}
				if _, err := c.Get(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := h.Status()
	if len(st.Peers) != clients {
		t.Fatalf("%d peers, want %d", len(st.Peers), clients)
	}
	for _, p := range st.Peers {
		if p.PersistentKeepalive != rounds-1 {
			t.Errorf("peer %x keepalive %d, want %d", p.PublicKey[0], p.PersistentKeepalive, rounds-1)
		}
	}
}

func TestServeOptionsValidated(t *testing.T) {
	l, err := ipc.Listen(shortDir(t), "wg0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Serve(&mapHandler{}, ipc.ServeOptions{MaxClients: -1}); err == nil {
		t.Error("negative MaxClients accepted")
	}
	if err := l.Serve(nil, ipc.ServeOptions{}); err == nil {
		t.Error("nil handler accepted")
	}
}

func TestInterfaces(t *testing.T) {
	dir := shortDir(t)
	for _, name := range []string{"wg1", "wg0"} {
		l, err := ipc.Listen(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	}
	os.WriteFile(filepath.Join(dir, "file.sock"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600)
	got, err := ipc.Interfaces(dir)
	sort.Strings(got)
	if err != nil || !reflect.DeepEqual(got, []string{"wg0", "wg1"}) {
		t.Fatalf("Interfaces = %q, %v", got, err)
	}
	if got, err := ipc.Interfaces(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Fatalf("missing directory: %q, %v", got, err)
	}
}

// TestOversizedRequestNotBuffered: a client streaming an endless set request
// gets -EMSGSIZE and is cut off after about MaxRequest bytes (plus what the
// socket buffers hold), instead of the server reading it all.
func TestOversizedRequestNotBuffered(t *testing.T) {
	const limit = 64 << 10
	h := &mapHandler{}
	l, _ := startServer(t, h, ipc.ServeOptions{MaxRequest: limit})
	c, err := net.Dial("unix", l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(safety))
	written := make(chan int64, 1)
	go func() {
		n, _ := io.WriteString(c, "set=1\npublic_key="+hexKey(1)+"\n")
		total := int64(n)
		line := []byte(strings.Repeat("allowed_ip=10.0.0.0/8\n", 1000))
		for total < 1<<30 {
			n, err := c.Write(line)
			total += int64(n)
			if err != nil {
				break
			}
		}
		written <- total
	}()
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || reply != fmt.Sprintf("errno=%d\n", ipc.ErrnoTooBig) {
		t.Fatalf("reply %q, %v; want -EMSGSIZE", reply, err)
	}
	if n := <-written; n > 16<<20 {
		t.Fatalf("the server took %d bytes of a request limited to %d", n, limit)
	}
	if len(h.Status().Peers) != 0 {
		t.Fatal("the oversized request was applied")
	}
}

// TestClientDeadline: a client facing a server that never answers gives up
// at its deadline, and the connection is not reused after.
func TestClientDeadline(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	go io.Copy(io.Discard, server) // reads requests, never answers
	c := ipc.NewClient(client)
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Get(); err == nil {
		t.Fatal("Get succeeded without a reply")
	}
	c.SetDeadline(time.Time{})
	if err := c.Set(&device.Config{}); err == nil {
		t.Fatal("a connection out of step was reused")
	}
}

// TestClientRejectsBadReplies: replies that break the protocol are errors
// with -EPROTO, never a made-up Status.
func TestClientRejectsBadReplies(t *testing.T) {
	for _, reply := range []string{
		"listen_port=1\n\n",          // no errno
		"listen_port=x\nerrno=0\n\n", // bad value
		"public_key=zz\nerrno=0\n\n", // bad key
		"public_key=" + hexKey(1) + "\nlast_handshake_time_nsec=1000000000\nerrno=0\n\n",
		"garbage\nerrno=0\n\n", // not key=value
		"errno=x\n\n",          // bad errno
		"listen_port=1\n",      // cut short
	} {
		client, server := net.Pipe()
		go func() {
			bufio.NewReader(server).ReadString('\n')
			io.WriteString(server, reply)
			server.Close()
		}()
		c := ipc.NewClient(client)
		_, err := c.Get()
		c.Close()
		var ie *ipc.Error
		if !errors.As(err, &ie) || ie.Errno != ipc.ErrnoProtocol {
			t.Errorf("reply %q: %v, want an -EPROTO error", reply, err)
		}
	}
}

// TestPathMTUOnlyInFips: a peer's path MTU travels in the get=fips reply,
// which AddFips reads into the status Get returned, and never in get=1,
// which wg reads.
func TestPathMTUOnlyInFips(t *testing.T) {
	st := sampleStatus()
	st.Peers[0].PathMTU, st.Peers[0].PathMTUSource = 1276, "probe"
	h := &mapHandler{st: st}
	l, dir := startServer(t, h, ipc.ServeOptions{})
	if raw := rawExchange(t, l.Path(), "get=1\n\nbad\n\n"); strings.Contains(raw, "path_mtu") || !strings.Contains(raw, "public_key=") {
		t.Fatalf("get=1 carries the path MTU:\n%s", raw)
	}
	c := dial(t, dir)
	got, err := c.Get()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddFips(&got); err != nil {
		t.Fatal(err)
	}
	for i, ps := range got.Peers {
		want := st.Peers[i]
		if ps.PathMTU != want.PathMTU || (want.PathMTU > 0 && ps.PathMTUSource != want.PathMTUSource) {
			t.Fatalf("peer %d: path MTU %d (%q), want %d (%q)", i, ps.PathMTU, ps.PathMTUSource, want.PathMTU, want.PathMTUSource)
		}
	}
	if len(got.Counters) != len(st.Counters) {
		t.Fatalf("%d counters, want %d", len(got.Counters), len(st.Counters))
	}
}
