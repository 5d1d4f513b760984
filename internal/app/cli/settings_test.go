package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSettings(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{
		envDisableGSO:       "1",
		envDisableGRO:       "false",
		envConnectedSockets: "0",
		envCPUProfile:       filepath.Join(dir, "cpu"),
	}
	s, err := readSettings(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !s.disableGSO || s.disableGRO || s.maxConnected != -1 || s.cpuProfile != env[envCPUProfile] || s.memProfile != "" {
		t.Fatalf("got %+v", s)
	}
	if s, err := readSettings(func(string) string { return "" }); err != nil || s != (settings{}) {
		t.Fatalf("unset: %+v, %v; want the zero settings (every default)", s, err)
	}
	if s, _ := readSettings(func(k string) string { return map[string]string{envConnectedSockets: "64"}[k] }); s.maxConnected != 64 {
		t.Fatalf("%s=64: cap %d", envConnectedSockets, s.maxConnected)
	}
	for v, off := range map[string]bool{"off": true, "0": true, "false": true, "on": false, "1": false, "true": false} {
		s, err := readSettings(func(k string) string { return map[string]string{envSandbox: v}[k] })
		if err != nil || s.noSandbox != off {
			t.Errorf("%s=%s: sandbox off %v, err %v; want off %v", envSandbox, v, s.noSandbox, err, off)
		}
	}
}

// A value that does not parse is an error naming the variable, never a
// silent default.
func TestReadSettingsRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ k, v string }{
		{envDisableGSO, "yes"},
		{envDisableGRO, "2"},
		{envConnectedSockets, "-1"},
		{envConnectedSockets, "many"},
		{envConnectedSockets, "1e3"},
		{envCPUProfile, "/no/such/dir/cpu"},
		{envMemProfile, "/no/such/dir/mem"},
		{envSandbox, "no"},
		{envSandbox, "disabled"},
	} {
		_, err := readSettings(func(k string) string {
			if k == tc.k {
				return tc.v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), tc.k) {
			t.Errorf("%s=%q: got %v, want an error that names it", tc.k, tc.v, err)
		}
	}
}

// The daemon stops at start, before it creates anything, on a bad value;
// so does a bad metrics setting.
func TestDaemonRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct{ k, v string }{
		{envDisableGSO, "on"},
		{envConnectedSockets, "lots"},
		{envMetricsMaxPeers, "ten"},
		{envSandbox, "none"},
	} {
		t.Run(tc.k, func(t *testing.T) {
			t.Setenv(tc.k, tc.v)
			// An interface name tun refuses: should the value pass, the
			// test fails on that error instead of starting a daemon.
			err := newApp().Run(context.Background(), []string{"fips-go", "-f", "bad/name"})
			if err == nil || !strings.Contains(err.Error(), tc.k) {
				t.Fatalf("got %v, want an error about %s=%s", err, tc.k, tc.v)
			}
		})
	}
}
