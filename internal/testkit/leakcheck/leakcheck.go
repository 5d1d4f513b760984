// Package leakcheck lets tests see which goroutines are running, so that
// they can fail when goroutines they started outlive them.
package leakcheck

import (
	"bytes"
	"runtime"
)

// Stacks returns the stack of every goroutine, one block each, as
// runtime.Stack prints them: "goroutine N [state]:" and its frames.
func Stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		out = append(out, string(block))
	}
	return out
}
