package metrics

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"syscall"
)

// userHZ is the unit of /proc's CPU times and start time: USER_HZ, 100
// on every Linux ABI whatever the kernel's own tick.
const userHZ = 100

// series adds the process_* series from /proc/self and getrlimit; one it
// cannot read is left out. It allocates a few KiB whatever the process.
func (p *procInfo) series(e *exposition) {
	buf := make([]byte, 4096) // /proc/self/stat and status are well under it
	if st := readProc("/proc/self/stat", buf); st != nil {
		p.stat(e, st)
	}
	if st := readProc("/proc/self/status", buf); st != nil {
		for _, f := range []struct{ key, name, help string }{
			{"VmHWM:", "process_resident_memory_peak_bytes", "Peak resident memory size in bytes."},
			{"RssAnon:", "process_resident_memory_anon_bytes", "Resident anonymous memory in bytes."},
			{"RssFile:", "process_resident_memory_file_bytes", "Resident file-backed memory in bytes."},
		} {
			if kb, ok := statusKB(st, f.key); ok {
				e.gauge(f.name, f.help, float64(kb)*1024, "")
			}
		}
	}
	if n, ok := openFDs(); ok {
		e.gauge("process_open_fds", "Open file descriptors.", float64(n), "")
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		e.gauge("process_max_fds", "Maximum number of open file descriptors.", float64(rl.Cur), "")
	}
}

// stat adds the series of /proc/self/stat (proc_pid_stat(5)).
func (p *procInfo) stat(e *exposition, st []byte) {
	// The command name, field 2, is in parentheses and may hold anything;
	// fields are counted after its last ')'.
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return
	}
	f := bytes.Fields(st[i+1:])
	num := func(field int) (uint64, bool) {
		if field-3 >= len(f) {
			return 0, false
		}
		v, err := strconv.ParseUint(string(f[field-3]), 10, 64)
		return v, err == nil
	}
	utime, ok1 := num(14)
	stime, ok2 := num(15)
	if ok1 && ok2 {
		e.add("process_cpu_seconds_total", kindCounter, "Total user and system CPU time spent in seconds.",
			sample{v: floatValue(float64(utime+stime) / userHZ)})
	}
	if v, ok := num(23); ok {
		e.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(v), "")
	}
	if v, ok := num(24); ok {
		e.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(v)*float64(os.Getpagesize()), "")
	}
	if ticks, ok := num(22); ok {
		p.once.Do(func() {
			if boot, ok := bootTime(); ok {
				p.start = float64(boot) + float64(ticks)/userHZ
			}
		})
	}
	if p.start > 0 {
		e.gauge("process_start_time_seconds", "Start time of the process since the Unix epoch in seconds.", p.start, "")
	}
}

// readProc reads a small /proc file into buf, nil on an error; a file
// longer than buf is cut.
func readProc(path string, buf []byte) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil
	}
	return buf[:n]
}

// statusKB is the value of a "Key:   123 kB" line of /proc/self/status.
func statusKB(st []byte, key string) (uint64, bool) {
	for line := range bytes.Lines(st) {
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			v = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))
			n, err := strconv.ParseUint(string(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// openFDs counts /proc/self/fd, a batch of names at a time.
func openFDs() (int, bool) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(64)
		n += len(names)
		if err == io.EOF {
			return n - 1, true // less the descriptor reading the directory
		}
		if err != nil {
			return 0, false
		}
	}
}

// bootTime is the "btime" line of /proc/stat, read a line at a time: the
// file's interrupt line alone can be tens of KiB on a large machine.
func bootTime() (int64, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256)
	lineStart := true
	for {
		line, err := r.ReadSlice('\n')
		if lineStart {
			if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
				n, perr := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
				return n, perr == nil && err == nil
			}
		}
		switch err {
		case nil:
			lineStart = true
		case bufio.ErrBufferFull:
			lineStart = false
		default:
			return 0, false
		}
	}
}
