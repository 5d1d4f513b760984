package cli

import (
	"io"
	"os"
)

// isTerminal reports whether w is a character device such as a terminal
// (not a file, pipe or socket), where rewriting a line in place or
// clearing the screen makes sense.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
