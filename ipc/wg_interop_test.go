//go:build linux

package ipc_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/internal/app/showfmt"
	"github.com/fips-go/fips-go/ipc"
)

// wgInterop serves a mapHandler on the real socket directory, where wg(8)
// looks, under a name no one else uses. It skips unless run as root with wg
// installed.
func wgInterop(t *testing.T) (h *mapHandler, name string, run func(args ...string) (string, error)) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to use " + ipc.DefaultSocketDir)
	}
	wg, err := exec.LookPath("wg")
	if err != nil {
		t.Skip("wg(8) not installed")
	}
	name = fmt.Sprintf("fipsipc%d", os.Getpid()%100000)
	h = &mapHandler{}
	l, err := ipc.Listen("", name)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Serve(h, ipc.ServeOptions{}) }()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	run = func(args ...string) (string, error) {
		cmd := exec.Command(wg, args...)
		cmd.Env = append(os.Environ(), "WG_HIDE_KEYS=always", "WG_COLOR_MODE=never")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stdout.String(), fmt.Errorf("wg %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String(), nil
	}
	return h, name, run
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWgInterop drives the server with the real wg(8) and checks that our
// show, dump and showconf renderings match wg's byte for byte.
func TestWgInterop(t *testing.T) {
	h, name, run := wgInterop(t)
	dir := t.TempDir()
	priv := writeFile(t, dir, "priv", b64(1)+"\n")
	psk := writeFile(t, dir, "psk", b64(3)+"\n")
	if _, err := run("set", name, "private-key", priv, "listen-port", "51820", "fwmark", "0x20",
		"peer", b64(2), "preshared-key", psk, "endpoint", "192.0.2.1:51820", "persistent-keepalive", "25",
		"allowed-ips", "10.0.0.1/8, fd00::/64",
		"peer", b64(4), "endpoint", "[fe80::1%lo]:1", "allowed-ips", "::/0"); err != nil {
		t.Fatal(err)
	}
	st := h.Status()
	if st.ListenPort != 51820 || st.FwMark != 0x20 || len(st.Peers) != 2 ||
		!reflect.DeepEqual(st.Peers[0].AllowedIPs, sampleStatus().Peers[0].AllowedIPs) {
		t.Fatalf("state after wg set: %+v", st)
	}
	// Give the peers some traffic for the show output.
	h.mu.Lock()
	h.st.Peers[0].RxBytes, h.st.Peers[0].TxBytes = 1536, 5<<20
	h.mu.Unlock()
	st = h.Status()

	compare := func(args []string, ours string) {
		t.Helper()
		theirs, err := run(args...)
		if err != nil {
			t.Fatal(err)
		}
		if theirs != ours {
			t.Errorf("wg %s:\nwg prints:\n%s\nwe print:\n%s", strings.Join(args, " "), theirs, ours)
		}
	}
	var b bytes.Buffer
	showfmt.FormatDump(&b, "", st)
	compare([]string{"show", name, "dump"}, b.String())
	compare([]string{"showconf", name}, ipc.FormatConfig(st))
	b.Reset()
	showfmt.FormatShow(&b, name, st, showfmt.ShowOptions{})
	compare([]string{"show", name}, b.String())

	out, err := run("show", "interfaces")
	if err != nil || !slices.Contains(strings.Fields(out), name) {
		t.Errorf("wg show interfaces = %q, %v; want %s listed", out, err, name)
	}

	// wg reports our errno.
	h.mu.Lock()
	h.applyErr = fmt.Errorf("bind: %w", syscall.EADDRINUSE)
	h.mu.Unlock()
	if _, err := run("set", name, "listen-port", "1"); err == nil || !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("refused set: %v, want wg to print EADDRINUSE", err)
	}
}

// TestWgConfSemantics checks that setconf, addconf and syncconf through
// our parser and SyncConfig end in the same state as through wg(8).
func TestWgConfSemantics(t *testing.T) {
	h, name, run := wgInterop(t)
	dir := t.TempDir()
	start := "[Interface]\nPrivateKey = " + b64(1) + "\nListenPort = 1000\n" +
		"[Peer]\nPublicKey = " + b64(2) + "\nPresharedKey = " + b64(3) + "\nPersistentKeepalive = 25\nAllowedIPs = 10.2.0.0/16\n" +
		"[Peer]\nPublicKey = " + b64(4) + "\nAllowedIPs = 10.4.0.0/16\n"
	// Peer 2 restates its preshared key and keepalive: older wg releases
	// (v1.0.20210914 among them) leave them alone in syncconf when the file
	// omits them, while current wireguard-tools (commit 780182e, 2026) and
	// SyncConfig clear them; TestSyncConfig covers that case.
	next := "[Interface]\nPrivateKey = " + b64(1) + "\n" +
		"[Peer]\nPublicKey = " + b64(2) + "\nPresharedKey = " + b64(7) + "\nPersistentKeepalive = off\n" +
		"AllowedIPs = 10.2.0.0/24, 10.4.0.0/16\n" +
		"[Peer]\nPublicKey = " + b64(5) + "\nEndpoint = 192.0.2.5:5\n"
	extra := "[Peer]\nPublicKey = " + b64(6) + "\nAllowedIPs = 10.6.0.0/16\n"
	startF, nextF, extraF := writeFile(t, dir, "start.conf", start), writeFile(t, dir, "next.conf", next), writeFile(t, dir, "extra.conf", extra)

	ours := &mapHandler{}
	apply := func(cfg *device.Config, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := ours.Apply(cfg); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string) {
		t.Helper()
		if got, want := h.Status(), ours.Status(); !reflect.DeepEqual(got, want) {
			t.Fatalf("after %s:\nvia wg:   %+v\nvia ipc:  %+v", step, got, want)
		}
	}
	for _, step := range []struct{ cmd, file, text string }{
		{"setconf", startF, start},
		{"syncconf", nextF, next},
		{"addconf", extraF, extra},
		{"setconf", nextF, next},
	} {
		if _, err := run(step.cmd, name, step.file); err != nil {
			t.Fatal(err)
		}
		switch step.cmd {
		case "setconf":
			cfg, _, err := ipc.ParseConfigFile(strings.NewReader(step.text), step.file, nil)
			apply(cfg, err)
		case "addconf":
			cfg, _, err := ipc.ParseAddConfigFile(strings.NewReader(step.text), step.file, nil)
			apply(cfg, err)
		case "syncconf":
			want, _, err := ipc.ParseConfigFile(strings.NewReader(step.text), step.file, nil)
			apply(ipc.SyncConfig(ours.Status(), want), err)
		}
		check(step.cmd + " " + filepath.Base(step.file))
	}
}

// TestWgQuickStrip compares StripQuickConfig with `wg-quick strip`.
func TestWgQuickStrip(t *testing.T) {
	wgQuick, err := exec.LookPath("wg-quick")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and wg-quick(8)")
	}
	conf := "[Interface] # wg-quick file\nAddress = 10.0.0.1/24\n  dns=1.1.1.1\nMTU = 1420\nTable = off\n" +
		"PreUp = a\nPostUp = b # c\nPreDown = d\nPostDown = e\nSaveConfig = false\n" +
		"PrivateKey = " + b64(1) + "\n# comment\n\n[Peer]\nPublicKey = " + b64(2) + "\nDNS = x\n"
	path := writeFile(t, t.TempDir(), "fipsq0.conf", conf)
	out, err := exec.Command(wgQuick, "strip", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	// wg-quick echoes its accumulated lines, adding one newline at the end.
	theirs := strings.TrimSuffix(string(out), "\n")
	if ours := ipc.StripQuickConfig(conf); ours != theirs {
		t.Fatalf("wg-quick strip:\n%q\nStripQuickConfig:\n%q", theirs, ours)
	}
}
