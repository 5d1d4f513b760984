package procs

import (
	"bytes"
	"errors"
)

var errNoCPULine = errors.New("/proc/stat: no cpu line")

// parseStat reads the start of /proc/stat: the machine's idle ticks (idle
// and iowait), all ticks, and the number of CPUs (the cpuN lines that
// follow). Ticks are in USER_HZ; only their ratio is used. It does not
// allocate: the controller runs it twice a second for the daemon's life.
func parseStat(b []byte) (idle, all uint64, cpus int, err error) {
	line, rest := cutLine(b)
	f, line := field(line)
	if string(f) != "cpu" {
		return 0, 0, 0, errNoCPULine
	}
	// user nice system idle iowait irq softirq steal guest guest_nice;
	// guest time is already inside user and nice.
	for i := 0; i < 8; i++ {
		f, line = field(line)
		if len(f) == 0 && i < 4 {
			return 0, 0, 0, errNoCPULine
		}
		if len(f) == 0 {
			break // older kernels have fewer columns
		}
		n, ok := parseUint(f)
		if !ok {
			return 0, 0, 0, errNoCPULine
		}
		all += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	for len(rest) > 0 {
		line, rest = cutLine(rest)
		if len(line) < 4 || !bytes.HasPrefix(line, []byte("cpu")) || line[3] < '0' || line[3] > '9' {
			break
		}
		cpus++
	}
	if cpus == 0 {
		return 0, 0, 0, errNoCPULine
	}
	return idle, all, cpus, nil
}

func cutLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// field returns the first space-separated field of b and what follows it.
func field(b []byte) (f, rest []byte) {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' {
		j++
	}
	return b[i:j], b[j:]
}

func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 18 { // 8 columns of 18 digits cannot overflow the sum
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
