package tun

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	wgtun "golang.zx2c4.com/wireguard/tun"
)

// A Linux TUN whose interface was deleted answers EBADFD.
func TestReadErrEBADFD(t *testing.T) {
	err := &os.PathError{Op: "read", Path: "/dev/net/tun", Err: syscall.EBADFD}
	if got := readErr(nullDevice{}, err); !errors.Is(got, ErrGone) {
		t.Fatalf("readErr(EBADFD) = %v, want ErrGone", got)
	}
}

// panicTUN is a wireguard-go TUN whose Read panics, as its split does on
// buffers too small for a segment.
type panicTUN struct{ wgtun.Device }

func (panicTUN) Read([][]byte, []int, int) (int, error) { panic("slice bounds out of range") }
func (panicTUN) File() *os.File                         { return nil }

func TestWireguardGoReadPanicIsAnError(t *testing.T) {
	bufs, sizes := [][]byte{make([]byte, 100)}, []int{0}
	for name, d := range map[string]Device{
		"kernel":   &kernelDevice{Device: panicTUN{}},
		"detached": &detachedDevice{Device: panicTUN{}},
	} {
		n, err := d.Read(bufs, sizes, Headroom)
		if n != 0 || !errors.Is(err, ErrReadPanicked) {
			t.Errorf("%s: Read = %d, %v; want 0 and ErrReadPanicked", name, n, err)
		}
	}
}

// fileDevice reads a pipe as a kernel TUN reads its file, for WakeReader.
type fileDevice struct {
	nullDevice
	f *os.File
}

func (d *fileDevice) File() *os.File { return d.f }

func (d *fileDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := d.f.Read(bufs[0][offset:])
	if err != nil {
		return 0, readErr(d, err)
	}
	sizes[0] = n
	return 1, nil
}

// WakeReader wakes a blocked Read with ErrWoken, once: the Read after it
// waits for data again.
func TestWakeReader(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	d := &fileDevice{f: r}
	bufs, sizes := [][]byte{make([]byte, 64)}, []int{0}
	done := make(chan error, 1)
	go func() {
		_, err := d.Read(bufs, sizes, Headroom)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it block; a Read after the wake-up returns woken too
	WakeReader(d)
	select {
	case err := <-done:
		if !errors.Is(err, ErrWoken) {
			t.Fatalf("woken Read: %v, want ErrWoken", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WakeReader did not wake the Read")
	}
	go func() {
		_, err := d.Read(bufs, sizes, Headroom)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Read after the wake-up returned at once (%v), want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := w.Write([]byte{0x45}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || sizes[0] != 1 {
		t.Fatalf("Read after a write: %v, size %d", err, sizes[0])
	}
	WakeReader(nullDevice{}) // a Device without a File: nothing to do, no panic
}
