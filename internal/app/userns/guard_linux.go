package userns

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// IsChild reports whether this process is the namespace child of Start:
// ChildEnv is set, the process is in the one-uid user namespace Start
// creates, and the kernel did not start it with raised privileges. The
// program's main calls ChildMain only when it is.
func IsChild() bool {
	return os.Getenv(ChildEnv) != "" && checkChild() == nil
}

// checkChild is IsChild's test of the process itself, not its environment.
func checkChild() error {
	auxv, err := unix.Auxv()
	if err != nil {
		// Some build modes hide the runtime's copy; the kernel's is in /proc.
		b, rerr := os.ReadFile("/proc/self/auxv")
		if rerr != nil {
			return fmt.Errorf("auxiliary vector: %v; %v", err, rerr)
		}
		if auxv, err = parseAuxv(b, int(unsafe.Sizeof(uintptr(0))), binary.NativeEndian); err != nil {
			return err
		}
	}
	if err := checkAuxv(auxv); err != nil {
		return err
	}
	m, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return err
	}
	return checkChildNamespace(string(m))
}
