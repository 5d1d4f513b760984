package ipc_test

import (
	"errors"
	"maps"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/ipc"
)

// namesHandler is a mapHandler that keeps endpoint names.
type namesHandler struct {
	mapHandler
	mu    sync.Mutex
	names map[noise.PublicKey]string
}

func (h *namesHandler) SetEndpointNames(names map[noise.PublicKey]string, replace bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if replace || h.names == nil {
		h.names = map[noise.PublicKey]string{}
	}
	for k, n := range names {
		if n == "" {
			delete(h.names, k)
		} else {
			h.names[k] = n
		}
	}
	return nil
}

func (h *namesHandler) EndpointNames() map[noise.PublicKey]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.names)
}

func TestEndpointNamesRoundTrip(t *testing.T) {
	h := &namesHandler{}
	_, dir := startServer(t, h, ipc.ServeOptions{})
	c := dial(t, dir)
	a, b := noise.PublicKey(key(2)), noise.PublicKey(key(3))
	if err := c.SetEndpointNames(map[noise.PublicKey]string{a: "vpn.example:51820", b: "b.example:1"}, false); err != nil {
		t.Fatal(err)
	}
	if err := c.SetEndpointNames(map[noise.PublicKey]string{b: ""}, false); err != nil {
		t.Fatal(err)
	}
	got, err := c.EndpointNames()
	if err != nil || len(got) != 1 || got[a] != "vpn.example:51820" {
		t.Fatalf("names %v, %v", got, err)
	}
	// A bad name anywhere changes nothing, and the connection stays usable.
	for _, bad := range []string{"192.0.2.1:51820", "no-port", "x.example:99999", "a b.example:1", strings.Repeat("a", 300) + ":1"} {
		err := c.SetEndpointNames(map[noise.PublicKey]string{b: bad}, true)
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("name %.40q: %v, want EINVAL", bad, err)
		}
	}
	if got, _ := c.EndpointNames(); len(got) != 1 || got[a] != "vpn.example:51820" {
		t.Fatalf("after refused requests: %v", got)
	}
	if err := c.SetEndpointNames(nil, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.EndpointNames(); len(got) != 0 {
		t.Fatalf("replace with nothing left %v", got)
	}
}

// A device without names (and wireguard-go) refuses the requests.
func TestEndpointNamesRefusedWithoutSupport(t *testing.T) {
	_, dir := startServer(t, &mapHandler{}, ipc.ServeOptions{})
	c := dial(t, dir)
	if err := c.SetEndpointNames(map[noise.PublicKey]string{key(2): "vpn.example:1"}, false); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("set: %v", err)
	}
	if _, err := c.EndpointNames(); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("get: %v", err)
	}
	if _, err := c.Get(); err != nil {
		t.Fatalf("connection unusable after the refusals: %v", err)
	}
}

// Raw requests that are malformed get an errno, never a panic, and an
// endless one is cut off.
func TestEndpointNamesMalformed(t *testing.T) {
	h := &namesHandler{}
	l, _ := startServer(t, h, ipc.ServeOptions{MaxRequest: 1 << 12})
	for _, req := range []string{
		"set=fipsnames\nendpoint_name=a.example:1\n\n",                // no key first
		"set=fipsnames\npublic_key=zz\nendpoint_name=a.example:1\n\n", // bad key
		"set=fipsnames\npublic_key=" + hexKey(2) + "\nreplace=true\n\n",
		"set=fipsnames\nnonsense\n\n",
		"set=fipsnames\n" + strings.Repeat("public_key="+hexKey(2)+"\nendpoint_name=a.example:1\n", 100) + "\n",
	} {
		c, err := net.Dial("unix", l.Path())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(safety))
		c.Write([]byte(req))
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		c.Close()
		if !strings.HasPrefix(string(buf[:n]), "errno=-22\n") {
			t.Errorf("%.60q: reply %q", req, buf[:n])
		}
	}
	if len(h.EndpointNames()) != 0 {
		t.Fatalf("a refused request left names: %v", h.EndpointNames())
	}
}
