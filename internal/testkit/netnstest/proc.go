//go:build unix

package netnstest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUTicks is process pid's user and system time in clock ticks (USER_HZ)
// from /proc/PID/stat; 0 when it cannot be read.
func CPUTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields are counted after the command name's last ')': utime and
	// stime are fields 14 and 15, the 12th and 13th after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

// ProcStatus is a numeric field of /proc/PID/status in its own unit (KiB
// for the Vm fields, a count for Threads); 0 when it cannot be read.
func ProcStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}
