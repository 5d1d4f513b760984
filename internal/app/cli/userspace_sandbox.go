package cli

import (
	"os"
	"sync/atomic"

	"github.com/fips-go/fips-go/internal/app/sandbox"
)

// sandboxRootless applies the rootless policy (sandbox.ApplyRootless) to
// a userspace mode once its sockets, listeners and namespace child (pid
// child, 0 for none) exist, unless FIPS_GO_SANDBOX turned it off; what
// could not be applied is logged as an error, and the mode runs on with
// the rest. The status line goes to the log and to sb, which the UAPI
// socket reports.
func sandboxRootless(o userspaceOptions, child int, sb *atomic.Pointer[string]) sandbox.Status {
	st := sandbox.Status{Off: true}
	if !o.settings.noSandbox {
		c := sandbox.RootlessConfig{ReadFiles: []string{o.source}, SocketDir: o.socketDir, Child: child}
		if p := heapProfileFile(o); p != "" {
			c.WriteFiles = append(c.WriteFiles, p)
		}
		st = sandbox.ApplyRootless(c)
	}
	_, errf := loggers("fips-go(userspace): ")
	for _, p := range st.Problems {
		errf("sandbox: %s", p)
	}
	o.logf("sandbox: %s", st)
	line := st.String()
	sb.Store(&line)
	return st
}

// heapProfileFile creates the heap profile's file (empty) if one was
// asked for, so that the sandbox can grant writing that one file instead
// of its whole directory; "" when none was asked for or it cannot be
// created (writeHeapProfile then reports why at exit).
func heapProfileFile(o userspaceOptions) string {
	if o.settings.memProfile == "" {
		return ""
	}
	p := o.settings.memProfile + "." + o.name
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return ""
	}
	f.Close()
	return p
}

// rootlessHandler answers get=fipssandbox for a userspace mode. Its UAPI
// socket serves before the sandbox applies (the socket is one of the
// things the sandbox keeps), so the line is read when asked.
type rootlessHandler struct {
	namedDevice
	sandbox *atomic.Pointer[string]
}

func (h rootlessHandler) Sandbox() string {
	if s := h.sandbox.Load(); s != nil {
		return *s
	}
	return "starting"
}
