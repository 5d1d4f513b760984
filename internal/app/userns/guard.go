package userns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// atSecure is the auxiliary vector's key for "started with raised
// privileges" (setuid, setgid or file capabilities).
const atSecure = 23

// checkChildNamespace decides from the text of /proc/self/uid_map whether
// this process is in a user namespace that Start made: exactly one line
// mapping uid 0 to a single outside uid. The initial namespace maps the
// whole range ("0 0 4294967295"), and a container's namespace maps more
// than one uid; neither is ours, so a local user who sets ChildEnv on a
// binary with file capabilities or setuid gets nothing.
func checkChildNamespace(uidMap string) error {
	lines := strings.Split(strings.TrimSpace(uidMap), "\n")
	if len(lines) != 1 {
		return fmt.Errorf("uid_map has %d lines; the namespace child's has one", len(lines))
	}
	f := strings.Fields(lines[0])
	if len(f) != 3 {
		return fmt.Errorf("uid_map line %q is not three numbers", lines[0])
	}
	var n [3]uint64
	for i, s := range f {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return fmt.Errorf("uid_map line %q: %w", lines[0], err)
		}
		n[i] = v
	}
	if n[0] != 0 || n[2] != 1 {
		return fmt.Errorf("uid_map %q is not a namespace of one uid mapped to root; not the namespace child's", lines[0])
	}
	return nil
}

// errSecure refuses a process that the kernel started in secure mode.
var errSecure = errors.New("started with raised privileges (AT_SECURE)")

// checkAuxv refuses when the auxiliary vector's AT_SECURE is set, or when
// it has no AT_SECURE at all, which the kernel always supplies.
func checkAuxv(auxv [][2]uintptr) error {
	for _, kv := range auxv {
		if kv[0] == atSecure {
			if kv[1] != 0 {
				return errSecure
			}
			return nil
		}
	}
	return errors.New("the auxiliary vector has no AT_SECURE entry")
}

// parseAuxv reads the raw /proc/self/auxv: pairs of machine words in the
// machine's byte order, ending with AT_NULL; a vector that ends before
// AT_NULL is an error.
func parseAuxv(b []byte, wordSize int, order binary.ByteOrder) ([][2]uintptr, error) {
	if wordSize != 4 && wordSize != 8 {
		return nil, fmt.Errorf("auxv: word size %d", wordSize)
	}
	word := func(p []byte) uintptr {
		if wordSize == 8 {
			return uintptr(order.Uint64(p))
		}
		return uintptr(order.Uint32(p))
	}
	var out [][2]uintptr
	for len(b) >= 2*wordSize {
		k, v := word(b), word(b[wordSize:])
		b = b[2*wordSize:]
		if k == 0 {
			return out, nil
		}
		out = append(out, [2]uintptr{k, v})
	}
	return nil, errors.New("auxv: no AT_NULL terminator")
}
