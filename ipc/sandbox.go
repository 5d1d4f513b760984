package ipc

import (
	"bufio"
	"bytes"
	"strings"
)

// fips-go's extension for the daemon's sandbox (wg never sends it;
// wireguard-go answers it with an error):
//
//	get=fipssandbox
//	(empty line)
//
// answered with one sandbox=LINE, the protections in force as the
// daemon's start-up log names them, then errno=0.

// sandboxHandler is a Handler that also says how it is sandboxed: the
// daemon's, whose Sandbox is one line naming the protections in force.
// Unexported because only fips-go's own daemon has a sandbox to report.
type sandboxHandler interface {
	Handler
	Sandbox() string
}

func handleSandbox(reply *bytes.Buffer, br *bufio.Reader, h Handler) bool {
	end, err := newLineReader(br, MaxLine).next()
	if err != nil || len(end) != 0 {
		writeErrno(reply, ErrnoInvalid)
		return false
	}
	sh, ok := h.(sandboxHandler)
	if !ok {
		writeErrno(reply, ErrnoInvalid)
		return true
	}
	// One line: what the handler says cannot break the reply's framing.
	line := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, sh.Sandbox())
	reply.WriteString("sandbox=")
	reply.WriteString(line)
	reply.WriteString("\n")
	writeErrno(reply, 0)
	return true
}

// Sandbox asks the daemon which protections are in force
// (get=fipssandbox). Against a daemon that does not know the request
// (wireguard-go, older fips-go) the error's errno is ErrnoInvalid.
func (c *Client) Sandbox() (string, error) {
	var line string
	err := c.roundTrip([]byte("get=fipssandbox\n\n"), func(k, v []byte) error {
		if string(k) == "sandbox" {
			line = string(v)
		}
		return nil
	})
	return line, err
}
