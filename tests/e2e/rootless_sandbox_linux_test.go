package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A rootless mode sandboxes itself once it serves (no_new_privs and
// seccomp on every thread, the status in the log and in `fips-go show`
// through its UAPI socket), its profiles are still written and its socket
// removed at exit; FIPS_GO_SANDBOX=off turns it off. The probe in
// internal/app/sandbox shows what the policy refuses; the other rootless
// tests, which run with it on, that every mode still works.
func TestRootlessSandbox(t *testing.T) {
	e := newRootlessEnv(t)
	for _, tc := range []struct {
		name string
		on   bool
	}{{"on", true}, {"off", false}} {
		t.Run(tc.name, func(t *testing.T) {
			run := e.nobodyDir(t, "run-"+tc.name)
			prof := e.nobodyDir(t, "prof-"+tc.name)
			cmd := e.nobody("userspace", "-c", e.conf, "--socket-dir", run, "--name", "fsb0", "--socks5", "127.0.0.1:0")
			cmd.Env = append(cmd.Env, "LOG_LEVEL=verbose",
				"FIPS_GO_CPUPROFILE="+filepath.Join(prof, "cpu"), "FIPS_GO_MEMPROFILE="+filepath.Join(prof, "heap"))
			if !tc.on {
				cmd.Env = append(cmd.Env, "FIPS_GO_SANDBOX=off")
			}
			// The proxy announces itself before the sandbox applies (it is one of
			// the listeners the sandbox keeps): wait for the sandbox line.
			out, eof := startAnnounced(t, e, cmd, "sandbox: ")
			for tid, f := range daemonThreads(t, cmd.Process.Pid) {
				want := map[bool][2]string{true: {"1", "2"}, false: {"0", "0"}}[tc.on]
				if f["NoNewPrivs"] != want[0] || f["Seccomp"] != want[1] {
					t.Errorf("thread %d: NoNewPrivs %q Seccomp %q, want %q %q", tid, f["NoNewPrivs"], f["Seccomp"], want[0], want[1])
				}
			}
			show := e.nobody("show", "fsb0")
			show.Env = append(show.Env, "WG_SOCKET_DIR="+run)
			text, err := e.run(show)
			if err != nil {
				t.Fatalf("fips-go show: %v\n%s", err, text)
			}
			want := "  sandbox: off\n"
			if tc.on {
				want = "  sandbox: caps=none no_new_privs seccomp landlock"
			}
			if !strings.Contains(text, want) {
				t.Errorf("fips-go show does not say %q:\n%s", want, text)
			}
			if !strings.Contains(text, "latest handshake") && !strings.Contains(text, "peer:") {
				t.Errorf("fips-go show lists no peer:\n%s", text)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-eof:
			case <-time.After(20 * time.Second):
				t.Fatalf("no exit within 20 s of SIGTERM:\n%s", out())
			}
			cmd.Wait()
			log := out()
			if w := strings.TrimSpace(want); !strings.Contains(log, w) {
				t.Errorf("the log does not say %q:\n%s", w, log)
			}
			for line := range strings.Lines(log) {
				if strings.Contains(line, "sandbox: ") && !strings.Contains(line, strings.TrimSpace(want)) {
					t.Errorf("the sandbox reported a problem: %s", line)
				}
			}
			for _, p := range []string{"cpu.fsb0", "heap.fsb0"} {
				if fi, err := os.Stat(filepath.Join(prof, p)); err != nil || fi.Size() == 0 {
					t.Errorf("profile %s: %v (size %v)\n%s", p, err, fi, log)
				}
			}
			if _, err := os.Stat(filepath.Join(run, "fsb0.sock")); !os.IsNotExist(err) {
				t.Errorf("the UAPI socket is still there after exit: %v", err)
			}
		})
	}
}

// nobodyDir is a directory of e.dir's that nobody owns.
func (e *rootlessEnv) nobodyDir(t *testing.T, name string) string {
	t.Helper()
	d := filepath.Join(e.dir, name)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}
	return d
}

// startAnnounced starts cmd in the client namespace and waits until its
// standard error has a line containing what; out returns all it wrote,
// and eof is closed when it closed its standard error.
func startAnnounced(t *testing.T, e *rootlessEnv, cmd *exec.Cmd, what string) (out func() string, eof <-chan struct{}) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	inNetns(t, e.client, func() { err = cmd.Start() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var buf syncBuffer
	seen, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		announced := false
		for sc.Scan() {
			fmt.Fprintln(&buf, sc.Text())
			if !announced && strings.Contains(sc.Text(), what) {
				announced = true
				close(seen)
			}
		}
	}()
	select {
	case <-seen:
	case <-time.After(20 * time.Second):
		t.Fatalf("no %q within 20 s:\n%s", what, buf.String())
	}
	return buf.String, done
}
