package procs

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// statReader reads the start of /proc/stat into a buffer of its own,
// through a descriptor it keeps open (a pread at offset 0 makes the
// kernel write the file afresh), so a sample allocates nothing. 64 KiB
// holds the cpu lines of 700 CPUs.
type statReader struct {
	fd  int
	buf [64 << 10]byte
}

func newStatReader() (*statReader, error) {
	fd, err := unix.Open("/proc/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &statReader{fd: fd}, nil
}

func (r *statReader) close() { unix.Close(r.fd) }

func (r *statReader) read() (counters, error) {
	var c counters
	// Raw calls: neither can block, and an ordinary one would wake the
	// runtime's monitor thread (sysmon) on every sample of an idle daemon,
	// which then polls for a while (see conn's mmsgCall.do).
	nn, _, e := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(r.fd), uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)), 0, 0, 0)
	if e != 0 {
		return c, e
	}
	var err error
	c.idle, c.all, c.cpus, err = parseStat(r.buf[:int(nn)])
	if err != nil {
		return c, err
	}
	var ru unix.Rusage
	if _, _, e := unix.RawSyscall(unix.SYS_GETRUSAGE, uintptr(unix.RUSAGE_SELF), uintptr(unsafe.Pointer(&ru)), 0); e != 0 {
		return c, e
	}
	c.busy = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	c.wall = time.Now()
	return c, nil
}
