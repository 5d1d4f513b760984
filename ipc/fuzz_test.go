package ipc_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/ipctest"
	"github.com/fips-go/fips-go/ipc"
)

func FuzzParseSet(f *testing.F) {
	var b bytes.Buffer
	ipc.WriteSet(&b, sampleConfig())
	f.Add(b.String())
	f.Add(strings.TrimPrefix(ipctest.Seed, "set=1\n"))
	for _, br := range ipctest.BadRequests {
		if len(br.Request) < 4096 {
			f.Add(strings.TrimPrefix(br.Request, "set=1\n"))
		}
	}
	f.Add("public_key=" + hexKey(1) + "\nendpoint=[::ffff:1.2.3.4%x]:9\nallowed_ip=::ffff:1.2.3.4/100\n\n")
	f.Add("fips_proxy=http://u:p@proxy:3128\nfips_tls_cert=QUFB\nfips_tls_cert=\nfips_tls_key=QQ==\npublic_key=" + hexKey(1) +
		"\nfips_transport=tls\nfips_tls_sni=www.example.com\n\n")
	f.Fuzz(func(t *testing.T, req string) {
		cfg, err := ipc.ParseSet(strings.NewReader(req), 1<<16)
		if err != nil {
			var ie *ipc.Error
			if !errors.As(err, &ie) || ie.Errno >= 0 {
				t.Fatalf("error %v is not an *ipc.Error with a negative errno", err)
			}
			return
		}
		var out bytes.Buffer
		if err := ipc.WriteSet(&out, cfg); err != nil {
			t.Fatalf("WriteSet refused what ParseSet returned: %v", err)
		}
		again, err := ipc.ParseSet(&out, 0)
		if err != nil {
			t.Fatalf("ParseSet(WriteSet(x)): %v\n%s", err, out.String())
		}
		if !reflect.DeepEqual(cfg, again) {
			t.Fatalf("round trip differs:\nfirst  %+v\nsecond %+v", cfg, again)
		}
	})
}

// statusFromFile is the device state a setconf of cfg produces, for
// configurations simple enough to have one (each peer once, no
// incremental allowed-IP changes).
func statusFromFile(cfg *device.Config) (device.Status, bool) {
	st := device.Status{PrivateKey: *cfg.PrivateKey, ListenPort: *cfg.ListenPort, FwMark: *cfg.FwMark}
	seen := map[noise.PublicKey]bool{}
	for _, pc := range cfg.Peers {
		if seen[pc.PublicKey] || !pc.ReplaceAllowedIPs {
			return st, false
		}
		seen[pc.PublicKey] = true
		ps := device.PeerStatus{PublicKey: pc.PublicKey}
		if pc.PresharedKey != nil {
			ps.PresharedKey = *pc.PresharedKey
		}
		if pc.Endpoint != nil {
			ps.Endpoint = *pc.Endpoint
		}
		if pc.PersistentKeepalive != nil {
			ps.PersistentKeepalive = *pc.PersistentKeepalive
		}
		for _, c := range pc.AllowedIPs {
			if c.Remove {
				return st, false
			}
			ps.AllowedIPs = append(ps.AllowedIPs, c.Prefix)
		}
		st.Peers = append(st.Peers, ps)
	}
	return st, true
}

func FuzzParseConfigFile(f *testing.F) {
	f.Add(ipc.FormatConfig(sampleStatus()))
	f.Add("[Interface]\nFwMark=off\n[Peer]\nPublicKey=" + b64(2) + "\nEndpoint=test.wireguard.com:1\nAllowedIPs=+10.0.0.0/8,-::/0\n")
	f.Add("[Peer]\nPublicKey=" + b64(2) + "\nEndpoint=[fe80::1%eth0]:1\nPersistentKeepalive=off\nAllowedIPs=1.2.3.4,::1/128\n")
	f.Add("[interface]#c\nlistenport=0\nprivatekey=" + b64(0) + "\n")
	f.Fuzz(func(t *testing.T, text string) {
		cfg, _, err := ipc.ParseConfigFile(strings.NewReader(text), "fuzz.conf", fakeResolve)
		if err != nil {
			var ce *ipc.ConfigError
			if !errors.As(err, &ce) || ce.File != "fuzz.conf" || ce.Line < 0 || ce.Line > strings.Count(text, "\n")+1 {
				t.Fatalf("error %v does not name a line of fuzz.conf", err)
			}
			return
		}
		st, simple := statusFromFile(cfg)
		if !simple {
			return
		}
		back, _, err := ipc.ParseConfigFile(strings.NewReader(ipc.FormatConfig(st)), "again.conf", nil)
		if err != nil {
			t.Fatalf("FormatConfig output does not parse: %v\n%s", err, ipc.FormatConfig(st))
		}
		st2, _ := statusFromFile(back)
		if !reflect.DeepEqual(st, st2) {
			t.Fatalf("round trip differs:\nfirst  %+v\nsecond %+v", st, st2)
		}
	})
}
