package ipc_test

import (
	"errors"
	"testing"

	"github.com/fips-go/fips-go/ipc"
)

// sandboxHandler is a mapHandler that says how it is sandboxed.
type sandboxHandler struct {
	mapHandler
	line string
}

func (h *sandboxHandler) Sandbox() string { return h.line }

// get=fipssandbox returns the daemon's line, folded onto one line, and
// the connection stays usable; a handler without a sandbox answers
// ErrnoInvalid and stays usable too.
func TestSandboxRoundTrip(t *testing.T) {
	h := &sandboxHandler{line: "caps=net_admin no_new_privs\nseccomp landlock=v7"}
	_, dir := startServer(t, h, ipc.ServeOptions{})
	c := dial(t, dir)
	got, err := c.Sandbox()
	if err != nil || got != "caps=net_admin no_new_privs seccomp landlock=v7" {
		t.Fatalf("Sandbox() = %q, %v", got, err)
	}
	if _, err := c.Get(); err != nil {
		t.Fatalf("get after get=fipssandbox: %v", err)
	}

	_, dir = startServer(t, &mapHandler{}, ipc.ServeOptions{})
	c = dial(t, dir)
	got, err = c.Sandbox()
	var ie *ipc.Error
	if !errors.As(err, &ie) || ie.Errno != ipc.ErrnoInvalid || got != "" {
		t.Fatalf("without a sandbox: %q, %v; want ErrnoInvalid", got, err)
	}
	if _, err := c.Get(); err != nil {
		t.Fatalf("get after a refused get=fipssandbox: %v", err)
	}
}
