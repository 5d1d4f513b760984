package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseAuth(t *testing.T) {
	for _, tc := range []struct {
		in, user, pass string
		ok             bool
	}{
		{"alice:s3cret", "alice", "s3cret", true},
		{"alice:pa:ss", "alice", "pa:ss", true},
		{"alice:", "alice", "", true},
		{":pass", "", "", false},
		{"nocolon", "", "", false},
		{strings.Repeat("u", 256) + ":p", "", "", false},
		{"u:" + strings.Repeat("p", 256), "", "", false},
	} {
		u, p, err := ParseAuth(tc.in)
		if (err == nil) != tc.ok || u != tc.user || p != tc.pass {
			t.Errorf("ParseAuth(%q) = %q, %q, %v; want %q, %q, ok=%v", tc.in, u, p, err, tc.user, tc.pass, tc.ok)
		}
	}
}

// TestReadAuthFile: the password comes from a file only its owner can
// read, so it never appears in /proc/PID/cmdline.
func TestReadAuthFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		text string
		mode os.FileMode
		want string // an error's words; "" for success
	}{
		{"alice:s3cret\n", 0o600, ""},
		{"alice:s3cret\r\n", 0o400, ""},
		{"alice:s3cret", 0o600, ""},
		{"alice:s3cret\n", 0o640, "0640"},
		{"alice:s3cret\n", 0o604, "0604"},
		{"alice:s3cret\nbob:x\n", 0o600, "one line"},
		{"", 0o600, "USER:PASS"},
		{"nocolon\n", 0o600, "USER:PASS"},
	} {
		p := write("auth", tc.text, tc.mode)
		u, pw, err := ReadAuthFile(p)
		switch {
		case tc.want == "" && (err != nil || u != "alice" || pw != "s3cret"):
			t.Errorf("%q mode %o: %q, %q, %v; want alice, s3cret", tc.text, tc.mode, u, pw, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q mode %o: error %v, want one naming %q", tc.text, tc.mode, err, tc.want)
		}
		os.Remove(p)
	}
	if _, _, err := ReadAuthFile(dir); err == nil || !strings.Contains(err.Error(), "regular file") {
		t.Errorf("a directory: %v, want a refusal", err)
	}
	if _, _, err := ReadAuthFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file was read")
	}
	big := write("big", "alice:"+strings.Repeat("p", 5000), 0o600)
	if _, _, err := ReadAuthFile(big); err == nil {
		t.Error("a 5 KB file was taken as a password")
	}
}

// TestReadAuthFileOwner: a private file owned by someone else is refused,
// since whoever owns it can change it or its mode.
func TestReadAuthFileOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	p := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(p, []byte("alice:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadAuthFile(p); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("a file owned by uid 65534: %v, want a refusal naming the owner", err)
	}
}

func TestAuthFromFlags(t *testing.T) {
	p := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(p, []byte("alice:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if a, w, err := AuthFromFlags("", p); a != "alice:s3cret" || w != "" || err != nil {
		t.Errorf("file: %q, %q, %v", a, w, err)
	}
	if a, w, err := AuthFromFlags("bob:pw", ""); a != "bob:pw" || !strings.Contains(w, "--socks5-auth-file") || err != nil {
		t.Errorf("inline: %q, %q, %v; want bob:pw and a warning", a, w, err)
	}
	if a, w, err := AuthFromFlags("", ""); a != "" || w != "" || err != nil {
		t.Errorf("neither: %q, %q, %v", a, w, err)
	}
	if _, _, err := AuthFromFlags("bob:pw", p); err == nil {
		t.Error("both accepted")
	}
	if _, _, err := AuthFromFlags("nocolon", ""); err == nil {
		t.Error("inline without a colon accepted")
	}
}
