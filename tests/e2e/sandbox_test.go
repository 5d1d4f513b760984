package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/app/sandbox"
)

// TestSandbox: the interface daemon, started as wg-quick starts it and
// configured with wg, passes traffic with its sandbox on, and every one of
// the threads of the process that handles the packets (the worker) shows
// a user other than root, NoNewPrivs 1, Seccomp 2 (filter) and an
// effective, permitted and bounding capability set of exactly the named
// capabilities, without CAP_SYS_ADMIN, which are enough to move to
// listen port 999 and set a fwmark after start; `fips-go show` says so.
// Its parent, the monitor, is root with CAP_SYS_ADMIN and CAP_NET_ADMIN
// only, sandboxed too; the two interfaces' workers have different users,
// so neither can signal or read the other. With FIPS_GO_SANDBOX=off none
// of it is set, the daemon is one root process, and show says off.
func TestSandbox(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		on   bool
	}{
		{"on", nil, true},
		{"off", []string{"FIPS_GO_SANDBOX=off"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := fipsGo(t)
			im.env = tc.env
			p := newPair(t, pairOpts{implA: im})
			p.a.ns.waitPing(p.b.tun4, 20*time.Second)
			if r := p.a.ns.ping(p.b.tun4, 20, 1000, false, "-i", "0.05"); r.received != 20 {
				t.Fatalf("ping: %d of 20 replies\n%s", r.received, r.out)
			}
			if r := p.a.ns.ping(p.b.tun6, 5, 1000, false, "-i", "0.05"); r.received != 5 {
				t.Fatalf("ping over IPv6: %d of 5 replies\n%s", r.received, r.out)
			}
			// What the capabilities kept are for: a listen port below 1024
			// (CAP_NET_BIND_SERVICE) and a fwmark (CAP_NET_ADMIN), set
			// after start; B follows A to its new port (roaming).
			p.a.wg("set", p.a.iface, "listen-port", "999", "fwmark", "0x77")
			if got := strings.TrimSpace(p.a.wg("show", p.a.iface, "listen-port")); got != "999" {
				t.Fatalf("listen port %q after setting 999", got)
			}
			if got := strings.TrimSpace(p.a.wg("show", p.a.iface, "fwmark")); got != "0x77" {
				t.Fatalf("fwmark %q after setting 0x77", got)
			}
			if r := p.a.ns.ping(p.b.tun4, 5, 1000, false, "-i", "0.05"); r.received != 5 {
				t.Fatalf("ping from listen port 999: %d of 5 replies\n%s", r.received, r.out)
			}
			show := p.a.fipsctl("show", p.a.iface)
			checkSeparation(t, p.a.pid, p.b.pid, tc.on)
			threads := daemonThreads(t, p.a.pid)
			if len(threads) < 2 {
				t.Fatalf("daemon %d: %d threads", p.a.pid, len(threads))
			}
			for tid, f := range threads {
				nnp, sc := f["NoNewPrivs"], f["Seccomp"]
				eff, prm, bnd := capField(t, f, "CapEff"), capField(t, f, "CapPrm"), capField(t, f, "CapBnd")
				if tc.on {
					if nnp != "1" || sc != "2" {
						t.Errorf("thread %d: NoNewPrivs %q Seccomp %q, want 1 and 2", tid, nnp, sc)
					}
					if uids := strings.Fields(f["Uid"]); len(uids) != 4 || slices.Contains(uids, "0") {
						t.Errorf("thread %d: Uid %q, want no root among real, effective, saved and file-system uid", tid, f["Uid"])
					}
					if (eff|prm|bnd)&capSysAdmin != 0 {
						t.Errorf("thread %d: CapEff %x CapPrm %x CapBnd %x hold CAP_SYS_ADMIN", tid, eff, prm, bnd)
					}
					if eff != sandbox.KeepMask() || prm != sandbox.KeepMask() || bnd != sandbox.KeepMask() {
						t.Errorf("thread %d: CapEff %x CapPrm %x CapBnd %x, want %x (%s)", tid, eff, prm, bnd, sandbox.KeepMask(), sandbox.KeepNames())
					}
					continue
				}
				if nnp != "0" || sc != "0" {
					t.Errorf("thread %d with the sandbox off: NoNewPrivs %q Seccomp %q, want 0 and 0", tid, nnp, sc)
				}
				if eff&^sandbox.KeepMask() == 0 {
					t.Errorf("thread %d with the sandbox off: CapEff %x, want root's full set", tid, eff)
				}
			}
			want := "  sandbox: off\n"
			if tc.on {
				want = "  sandbox: caps=" + sandbox.KeepNames() + " no_new_privs seccomp landlock"
			}
			if !strings.Contains(show, want) {
				t.Errorf("fips-go show does not say %q:\n%s", want, show)
			}
			if tc.on && !strings.Contains(show, " unix_sockets=") {
				t.Errorf("fips-go show does not say how Unix sockets are confined:\n%s", show)
			}
			if tc.on && strings.Contains(show, "landlock unavailable") && os.Getenv("FIPS_E2E") == "1" {
				t.Logf("this kernel has no Landlock: only capabilities, no_new_privs and seccomp were checked")
			}
		})
	}
}

const capSysAdmin = 1 << 21

// checkSeparation checks the worker a's parent: with the sandbox on, the
// monitor, a root fips-go with CAP_SYS_ADMIN and CAP_NET_ADMIN only,
// NoNewPrivs and a seccomp filter, and the two workers a and b under
// different users; with it off, a is the daemon itself, not a monitor's
// child.
func checkSeparation(t *testing.T, a, b int, on bool) {
	t.Helper()
	mon := procField(t, a, "PPid")
	exeA, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", a))
	exeM, _ := os.Readlink(fmt.Sprintf("/proc/%s/exe", mon))
	if !on {
		if exeM == exeA {
			t.Errorf("with the sandbox off, the daemon %d has a monitor (%s)", a, mon)
		}
		if uid := procUID(a); uid != 0 {
			t.Errorf("with the sandbox off, the daemon runs as uid %d", uid)
		}
		return
	}
	if exeM != exeA {
		t.Fatalf("the worker %d's parent %s is %q, not a fips-go monitor", a, mon, exeM)
	}
	m, _ := strconv.Atoi(mon)
	if uid := procUID(m); uid != 0 {
		t.Errorf("monitor %d runs as uid %d, want root", m, uid)
	}
	for tid, f := range daemonThreads(t, m) {
		if f["NoNewPrivs"] != "1" || f["Seccomp"] != "2" {
			t.Errorf("monitor thread %d: NoNewPrivs %q Seccomp %q, want 1 and 2", tid, f["NoNewPrivs"], f["Seccomp"])
		}
		if eff := capField(t, f, "CapEff"); eff != sandbox.Monitor.Mask() {
			t.Errorf("monitor thread %d: CapEff %x, want %x (%s)", tid, eff, sandbox.Monitor.Mask(), sandbox.Monitor.Names())
		}
	}
	if ua, ub := procUID(a), procUID(b); ua == ub {
		t.Errorf("the workers of two interfaces run as the same uid %d", ua)
	}
}

// procField is one field of /proc/PID/status.
func procField(t *testing.T, pid int, k string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if key, v, ok := strings.Cut(line, ":"); ok && key == k {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, k)
	return ""
}

// daemonThreads reads /proc/PID/task/*/status of every thread of pid.
func daemonThreads(t *testing.T, pid int) map[int]map[string]string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	threads := map[int]map[string]string{}
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name() + "/status")
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				f[k] = strings.TrimSpace(v)
			}
		}
		threads[tid] = f
	}
	return threads
}

func capField(t *testing.T, f map[string]string, k string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(f[k], 16, 64)
	if err != nil {
		t.Fatalf("%s: %q: %v", k, f[k], err)
	}
	return v
}
