package noise

import (
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"hash"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/crypto/blake2s"
	wgdevice "golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tai64n"
)

// Vectors for the primitives. The hex values were produced once with
// wireguard-go's exported KDF1/KDF2/KDF3, InitialChainKey/InitialHash and
// CookieGenerator and are checked in; the tests below also recompute them
// against wireguard-go (and crypto/hmac) on every run.

func seq(n int, start byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestInitialChainKeyAndHash(t *testing.T) {
	c := initialChainKey()
	assertBytes(t, "C_0", c[:], unhex(t, "60e26daef327efc02ec335e2a025d2d016eb4206f87277f52d38d1988b78cd36"))
	h := blake2sConcat(c[:], []byte(Identifier))
	assertBytes(t, "H_0", h[:], unhex(t, "2211b361081ac566691243db458ad5322d9c6c662293e8b70ee19c65ba079ef3"))
	assertBytes(t, "C_0 vs wireguard-go", c[:], wgdevice.InitialChainKey[:])
	assertBytes(t, "H_0 vs wireguard-go", h[:], wgdevice.InitialHash[:])
}

func TestKDFVectors(t *testing.T) {
	key, in := seq(32, 0), seq(32, 0x20)
	const (
		t0 = "6a96444e20e8d4c1cee974416acae1c10b3c92886010e54ed94dafb2c3b80ea0"
		t1 = "57af120b0de7acbe7907ec149c5ae870a2dbb74232b65777ba4123f1f7f888f5"
		t2 = "0926c7caabb6e8d73beda759e6f4f0d324ce5b5000bcf8cd784b26db3049faa9"
	)
	k1 := kdf1(key, in)
	assertBytes(t, "KDF1", k1[:], unhex(t, t0))
	a, b := kdf2(key, in)
	assertBytes(t, "KDF2 t0", a[:], unhex(t, t0))
	assertBytes(t, "KDF2 t1", b[:], unhex(t, t1))
	a, b, c := kdf3(key, in)
	assertBytes(t, "KDF3 t0", a[:], unhex(t, t0))
	assertBytes(t, "KDF3 t1", b[:], unhex(t, t1))
	assertBytes(t, "KDF3 t2", c[:], unhex(t, t2))
	// The transport-key derivation: KDF2 with empty input.
	a, b = kdf2(key, nil)
	assertBytes(t, "KDF2(empty) t0", a[:], unhex(t, "7a38c34bf2b8738d7374ca77c44ecb309a11d2b2528304fa86052c365e722624"))
	assertBytes(t, "KDF2(empty) t1", b[:], unhex(t, "1a17621f346abdc520746a9fb64d8eb03231d674fc15687537b0780fd9c060fd"))
}

// TestKDFMatchesWireGuardGo compares KDF1/2/3 with wireguard-go over input
// lengths that cross the stack-buffer fast path and the streaming fallback.
func TestKDFMatchesWireGuardGo(t *testing.T) {
	r := seeded(7)
	for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65, 100, 200} {
		key, in := make([]byte, 32), make([]byte, n)
		r.Read(key)
		r.Read(in)
		var w0, w1, w2 [32]byte
		wgdevice.KDF1(&w0, key, in)
		o0 := kdf1(key, in)
		assertBytes(t, "KDF1", o0[:], w0[:])
		wgdevice.KDF2(&w0, &w1, key, in)
		o0, o1 := kdf2(key, in)
		assertBytes(t, "KDF2 t0", o0[:], w0[:])
		assertBytes(t, "KDF2 t1", o1[:], w1[:])
		wgdevice.KDF3(&w0, &w1, &w2, key, in)
		o0, o1, o2 := kdf3(key, in)
		assertBytes(t, "KDF3 t0", o0[:], w0[:])
		assertBytes(t, "KDF3 t1", o1[:], w1[:])
		assertBytes(t, "KDF3 t2", o2[:], w2[:])
	}
}

// TestHMACMatchesStdlib checks our allocation-free HMAC against crypto/hmac,
// including keys longer than a block (hashed first) and long messages.
func TestHMACMatchesStdlib(t *testing.T) {
	r := seeded(8)
	newHash := func() hash.Hash { h, _ := blake2s.New256(nil); return h }
	for _, kn := range []int{0, 16, 32, 64, 65, 100} {
		for _, mn := range []int{0, 1, 33, 64, 65, 300} {
			key, msg := make([]byte, kn), make([]byte, mn)
			r.Read(key)
			r.Read(msg)
			m := hmac.New(newHash, key)
			m.Write(msg)
			got := hmacBlake2s(key, msg)
			assertBytes(t, "HMAC", got[:], m.Sum(nil))
		}
	}
}

func TestHashAllocationFree(t *testing.T) {
	key, in := seq(32, 0), seq(32, 0x20)
	if n := testing.AllocsPerRun(100, func() { kdf3(key, in) }); n != 0 {
		t.Fatalf("kdf3 allocates %v times", n)
	}
	h := [32]byte{}
	if n := testing.AllocsPerRun(100, func() { mixHash(&h, in) }); n != 0 {
		t.Fatalf("mixHash allocates %v times", n)
	}
}

// TestMACVectors checks MAC1, the cookie (MAC of the source address under
// the secret) and MAC2 on a fixed message and key.
func TestMACVectors(t *testing.T) {
	pub := PublicKey(seq(32, 0x40))
	msg := seq(InitiationSize, 0x80)
	copy(msg, []byte{1, 0, 0, 0})
	clear(msg[InitiationSize-2*macSize:])
	now := time.Unix(1e9, 0)

	gen := NewCookieGenerator(pub)
	gen.AddMACs(msg, now)
	assertBytes(t, "MAC1", msg[InitiationSize-32:InitiationSize-16], unhex(t, "1fcab096313dc16bcae5251a5b01ca25"))
	assertBytes(t, "MAC2 without cookie", msg[InitiationSize-16:], make([]byte, 16))
	want := bytes.Clone(msg)
	var wgGen wgdevice.CookieGenerator
	wgGen.Init(wgdevice.NoisePublicKey(pub))
	wgGen.AddMacs(want)
	assertBytes(t, "MAC1 vs wireguard-go", msg, want)

	// The checker's secret is the first 32 random bytes, then the nonce.
	src := netip.MustParseAddrPort("[2001:db8::1]:51820")
	var buf [64]byte
	assertBytes(t, "cookie source encoding", cookieSource(buf[:], src), unhex(t, "20010db80000000000000000000000016cca"))
	rand := bytes.NewReader(append(seq(32, 0x60), seq(24, 0xa0)...))
	checker := NewCookieChecker(pub, rand)
	reply, err := checker.CreateReply(msg, 7, src, now)
	if err != nil {
		t.Fatal(err)
	}
	assertBytes(t, "reply nonce", reply.Nonce[:], seq(24, 0xa0))
	if err := gen.ConsumeReply(&reply, now); err != nil {
		t.Fatal(err)
	}
	assertBytes(t, "cookie", gen.cookie[:], unhex(t, "5d008833f6aa05f511528d6303b7e255"))
	gen.AddMACs(msg, now)
	assertBytes(t, "MAC2", msg[InitiationSize-16:], unhex(t, "9f986d46c21cfb4632073948dc5fd6ab"))
	if !checker.CheckMAC2(msg, src, now) {
		t.Fatal("checker rejects the MAC2 of its own cookie")
	}
}

func TestTAI64N(t *testing.T) {
	ts := TAI64N(time.Date(2000, 1, 1, 0, 0, 0, 123456789, time.UTC))
	// 2^62 + 10 + 946684800 seconds; 123456789 ns rounded down to 2^24.
	assertBytes(t, "TAI64N", ts[:], unhex(t, "40000000386d438a07000000"))
	ts = TAI64N(time.Unix(0, 0))
	assertBytes(t, "TAI64N epoch", ts[:], unhex(t, "400000000000000a00000000"))
	// Timestamps within one whitening step are equal, so a responder
	// treats the second as a replay.
	base := time.Unix(1e9, 0)
	if TAI64N(base) != TAI64N(base.Add(16*time.Millisecond)) {
		t.Fatal("16 ms apart should share a timestamp")
	}
	if bytes.Compare(a(TAI64N(base.Add(17*time.Millisecond))), a(TAI64N(base))) <= 0 {
		t.Fatal("17 ms apart should be newer")
	}
	// Against wireguard-go's clock-reading stamp, in a bubble where the
	// clock is fixed.
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(1234567891 * time.Nanosecond)
		want := tai64n.Now()
		got := TAI64N(time.Now())
		assertBytes(t, "TAI64N vs wireguard-go", got[:], want[:])
	})
}

func a(ts [TimestampSize]byte) []byte { return ts[:] }
