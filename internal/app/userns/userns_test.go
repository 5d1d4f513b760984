package userns

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestDiagnose(t *testing.T) {
	for _, tc := range []struct {
		files map[string]string
		want  []string
	}{
		{map[string]string{"/proc/sys/user/max_user_namespaces": "63000\n"}, nil},
		{map[string]string{"/proc/sys/kernel/unprivileged_userns_clone": "0\n"}, []string{"kernel.unprivileged_userns_clone"}},
		{map[string]string{"/proc/sys/user/max_user_namespaces": "0\n"}, []string{"user.max_user_namespaces"}},
		{map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"}, []string{"AppArmor", "apparmor_restrict_unprivileged_userns"}},
	} {
		got := Diagnose(func(p string) (string, error) {
			if v, ok := tc.files[p]; ok {
				return v, nil
			}
			return "", errors.New("no such file")
		})
		if len(tc.want) == 0 && got != "" {
			t.Errorf("%v: %q, want nothing to blame", tc.files, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%v: %q does not name %q", tc.files, got, w)
			}
		}
	}
}

func TestResolvConf(t *testing.T) {
	got := ResolvConf([]netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}, []string{"corp", "example.org"})
	for _, w := range []string{"nameserver 10.0.0.1\n", "nameserver fd00::1\n", "search corp example.org\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("resolv.conf %q lacks %q", got, w)
		}
	}
}

func TestOptionsNormalize(t *testing.T) {
	o := Options{Args: []string{"true"}, Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")}}
	if err := o.normalize(); err != nil || o.Name != "fipsgo0" || o.MTU != 1420 {
		t.Fatalf("normalize: %v, %+v", err, o)
	}
	for _, bad := range []Options{
		{Addresses: o.Addresses},
		{Args: o.Args},
		{Args: o.Args, Addresses: o.Addresses, MTU: 40},
		{Args: o.Args, Addresses: o.Addresses, Name: "a/b"},
	} {
		if err := bad.normalize(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
