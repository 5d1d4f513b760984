package noise

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"io"
	"testing"
	"testing/cryptotest"
	"time"

	wgdevice "golang.zx2c4.com/wireguard/device"
)

// TestHandshakeBytesMatchWireGuardGo is the known-answer test of the whole
// handshake. wireguard-go is made deterministic with
// cryptotest.SetGlobalRandom, which fixes crypto/rand and so its ephemerals,
// indices, cookie secrets and nonces. We replay the same random stream into
// our code and require identical bytes for the initiation, the response,
// their MAC1s, a cookie reply and a MAC2, and keys that decrypt
// wireguard-go's traffic.
//
// wireguard-go's devices cannot live in a synctest bubble: their queues
// have finalizers that read bubbled channels from outside it and crash the
// test binary once collected. So time is real, and the one value it feeds
// into the messages, the initiation's timestamp, is recovered by decrypting
// wireguard-go's initiation as its responder would.
func TestHandshakeBytesMatchWireGuardGo(t *testing.T) {
	k := &kat{t: t, psk: PresharedKey(testKey(t, 300))}
	privA, privB := testKey(t, 100), testKey(t, 200)
	k.a, k.b = NewStatic(privA), NewStatic(privB)
	k.wgA = newWGPeer(t, privA, k.b.Public, k.psk) // wireguard-go initiator
	defer k.wgA.close()
	k.wgB = newWGPeer(t, privB, k.a.Public, k.psk) // wireguard-go responder
	defer k.wgB.close()

	k.initiation()
	k.response()
	k.keys()
	checkCookieMatchesWireGuardGo(t, time.Now(), k.b.Public, k.wgInitBytes, k.ourInitBytes, &k.wgGenA, k.ourGenA)
}

// kat carries the known-answer test from one message to the next: a
// initiates to b, on wireguard-go's side and on ours.
type kat struct {
	t        *testing.T
	a, b     *Static
	psk      PresharedKey
	wgA, wgB *wgPeer
	now      time.Time // the time in the initiation's timestamp

	wgInit                    *wgdevice.MessageInitiation
	wgInitBytes, ourInitBytes []byte
	wgGenA                    wgdevice.CookieGenerator
	ourGenA                   *CookieGenerator
	wgResp                    *wgdevice.MessageResponse
	ourRespBytes              []byte
	initiator, responder      *Handshake
}

// initiation: wireguard-go draws the ephemeral (32 bytes), then the sender
// index (4 bytes).
func (k *kat) initiation() {
	t := k.t
	cryptotest.SetGlobalRandom(t, 1)
	var err error
	k.wgInit, err = k.wgA.dev.CreateMessageInitiation(k.wgA.peer(t, k.b.Public))
	if err != nil {
		t.Fatal(err)
	}
	k.now = wgTimestamp(t, k.b, k.a.Public, k.wgInit)
	stream := seeded(1)
	k.initiator = NewHandshake(k.a, k.b.Public, k.psk)
	ourInit, err := k.initiator.CreateInitiation(k.now, stream, k.wgInit.Sender)
	if err != nil {
		t.Fatal(err)
	}
	if idx := readIndex(stream); idx != k.wgInit.Sender {
		t.Fatalf("random stream out of step: index %#x, wireguard-go used %#x", idx, k.wgInit.Sender)
	}
	k.wgInitBytes = wgMarshal(t, k.wgInit)
	k.ourInitBytes = ourInit.AppendTo(nil)
	assertBytes(t, "initiation", k.ourInitBytes, k.wgInitBytes)

	k.wgGenA.Init(wgdevice.NoisePublicKey(k.b.Public))
	k.wgGenA.AddMacs(k.wgInitBytes)
	k.ourGenA = NewCookieGenerator(k.b.Public)
	k.ourGenA.AddMACs(k.ourInitBytes, k.now)
	assertBytes(t, "initiation with MAC1", k.ourInitBytes, k.wgInitBytes)
}

func readIndex(r io.Reader) uint32 {
	var b [4]byte
	io.ReadFull(r, b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// response: wireguard-go draws the sender index first, then the ephemeral.
func (k *kat) response() {
	t := k.t
	if k.wgB.dev.ConsumeMessageInitiation(k.wgInit) == nil {
		t.Fatal("wireguard-go rejected its own initiation")
	}
	cryptotest.SetGlobalRandom(t, 2)
	var err error
	k.wgResp, err = k.wgB.dev.CreateMessageResponse(k.wgB.peer(t, k.a.Public))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseInitiation(k.ourInitBytes)
	if err != nil {
		t.Fatal(err)
	}
	info, err := OpenInitiation(k.b, &parsed)
	if err != nil {
		t.Fatal(err)
	}
	k.responder = NewHandshake(k.b, k.a.Public, k.psk)
	if err := k.responder.AcceptInitiation(&info, k.now); err != nil {
		t.Fatal(err)
	}
	stream := seeded(2)
	ourResp, err := k.responder.CreateResponse(stream, readIndex(stream))
	if err != nil {
		t.Fatal(err)
	}
	wgRespBytes := wgMarshal(t, k.wgResp)
	k.ourRespBytes = ourResp.AppendTo(nil)
	assertBytes(t, "response", k.ourRespBytes, wgRespBytes)

	var wgGenB wgdevice.CookieGenerator
	wgGenB.Init(wgdevice.NoisePublicKey(k.a.Public))
	wgGenB.AddMacs(wgRespBytes)
	NewCookieGenerator(k.a.Public).AddMACs(k.ourRespBytes, k.now)
	assertBytes(t, "response with MAC1", k.ourRespBytes, wgRespBytes)
}

// keys: wireguard-go's initiator derives its keypair from the response. As
// the handshakes were byte-identical, our responder's keys must decrypt
// what it sends, and it must decrypt what our responder sends.
func (k *kat) keys() {
	t := k.t
	if k.wgA.dev.ConsumeMessageResponse(k.wgResp) == nil {
		t.Fatal("wireguard-go rejected its own response")
	}
	if err := k.wgA.peer(t, k.b.Public).BeginSymmetricSession(); err != nil {
		t.Fatal(err)
	}
	resp, _ := ParseResponse(k.ourRespBytes)
	if err := k.initiator.ConsumeResponse(&resp, k.now); err != nil {
		t.Fatal(err)
	}
	kpA, err := k.initiator.DeriveKeypair(k.now)
	if err != nil {
		t.Fatal(err)
	}
	kpB, err := k.responder.DeriveKeypair(k.now)
	if err != nil {
		t.Fatal(err)
	}
	pkt := ipv4Packet(wgTunnelAddr, ourTunnelAddr, "known answer")
	k.wgA.tun.Outbound <- pkt
	got := openTransport(t, kpB, k.wgA.recv(t, TypeTransport))
	assertBytes(t, "wireguard-go's data under our responder keys", got[:len(pkt)], pkt)
	back := ipv4Packet(ourTunnelAddr, wgTunnelAddr, "and back")
	k.wgA.deliver(t, sealTransport(t, kpB, back))
	assertBytes(t, "our responder's data at wireguard-go", k.wgA.tunRead(t), back)
	// And our two sides agree with each other.
	checkKeypairsMatch(t, kpA, kpB)
	checkKeypairsMatch(t, kpB, kpA)
}

// wgTimestamp decrypts the timestamp of wireguard-go's initiation (to local,
// from remote) and returns the time it encodes.
func wgTimestamp(t *testing.T, local *Static, remote PublicKey, msg *wgdevice.MessageInitiation) time.Time {
	t.Helper()
	m, err := ParseInitiation(wgMarshal(t, msg))
	if err != nil {
		t.Fatal(err)
	}
	info, err := OpenInitiation(local, &m)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandshake(local, remote, PresharedKey{}) // the psk enters later
	if err := h.AcceptInitiation(&info, time.Now()); err != nil {
		t.Fatal(err)
	}
	secs := binary.BigEndian.Uint64(h.lastTimestamp[:8]) - tai64Base
	ts := time.Unix(int64(secs), int64(binary.BigEndian.Uint32(h.lastTimestamp[8:])))
	if d := time.Since(ts); d < 0 || d > time.Minute {
		t.Fatalf("wireguard-go's timestamp %v is not now", ts)
	}
	return ts
}

// checkCookieMatchesWireGuardGo continues the known-answer test with the
// cookie mechanism: a cookie reply to the initiation from both checkers with
// the same random stream (secret, then nonce), and the MAC2 both generators
// then add.
func checkCookieMatchesWireGuardGo(t *testing.T, now time.Time, responder PublicKey,
	wgInitBytes, ourInitBytes []byte, wgGen *wgdevice.CookieGenerator, ourGen *CookieGenerator,
) {
	t.Helper()
	var wgChecker wgdevice.CookieChecker
	wgChecker.Init(wgdevice.NoisePublicKey(responder))
	src := ourUDPAddr
	srcBytes := wgEndpoint(src).DstToBytes()

	cryptotest.SetGlobalRandom(t, 3)
	wgReply, err := wgChecker.CreateReply(wgInitBytes, 0xabcdef01, srcBytes)
	if err != nil {
		t.Fatal(err)
	}
	ourChecker := NewCookieChecker(responder, seeded(3))
	ourReply, err := ourChecker.CreateReply(ourInitBytes, 0xabcdef01, src, now)
	if err != nil {
		t.Fatal(err)
	}
	wgReplyBytes := wgMarshal(t, wgReply)
	assertBytes(t, "cookie reply", ourReply.AppendTo(nil), wgReplyBytes)

	if !wgGen.ConsumeReply(wgReply) {
		t.Fatal("wireguard-go rejected its own cookie reply")
	}
	if err := ourGen.ConsumeReply(&ourReply, now); err != nil {
		t.Fatal(err)
	}
	// Refresh the MACs of the same initiation, now with a cookie.
	wgGen.AddMacs(wgInitBytes)
	ourGen.AddMACs(ourInitBytes, now)
	assertBytes(t, "initiation with MAC2", ourInitBytes, wgInitBytes)
	if isZero(ourInitBytes[InitiationSize-macSize:]) {
		t.Fatal("MAC2 is zero after a cookie")
	}
	if !wgChecker.CheckMAC2(ourInitBytes, srcBytes) || !ourChecker.CheckMAC2(ourInitBytes, src, now) {
		t.Fatal("MAC2 rejected by a checker")
	}
}

// TestHandshakeWithWireGuardGo runs full handshakes between our core and a
// running wireguard-go device over an in-memory bind, both ways, with and
// without a preshared key, and exchanges data both ways under the derived
// keys.
func TestHandshakeWithWireGuardGo(t *testing.T) {
	for _, withPSK := range []bool{false, true} {
		for _, weInitiate := range []bool{true, false} {
			name := map[bool]string{true: "we-initiate", false: "wireguard-go-initiates"}[weInitiate]
			name += map[bool]string{true: "/psk", false: "/no-psk"}[withPSK]
			t.Run(name, func(t *testing.T) {
				wgPriv, ourPriv := testKey(t, 1), testKey(t, 2)
				var psk PresharedKey
				if withPSK {
					psk = PresharedKey(testKey(t, 3))
				}
				ours := NewStatic(ourPriv)
				w := newWGPeer(t, wgPriv, ours.Public, psk)
				defer w.close()
				if weInitiate {
					handshakeWeInitiate(t, w, ours, wgPriv.PublicKey(), psk)
				} else {
					handshakeWireGuardGoInitiates(t, w, ours, wgPriv.PublicKey(), psk)
				}
			})
		}
	}
}

func handshakeWeInitiate(t *testing.T, w *wgPeer, ours *Static, wgPub PublicKey, psk PresharedKey) {
	checker := NewCookieChecker(ours.Public, rand.Reader)
	gen := NewCookieGenerator(wgPub)
	now := time.Now()
	h := NewHandshake(ours, wgPub, psk)
	init, err := h.CreateInitiation(now, rand.Reader, 0x01020304)
	if err != nil {
		t.Fatal(err)
	}
	msg := init.AppendTo(nil)
	gen.AddMACs(msg, now)
	w.deliver(t, msg)

	respBytes := w.recv(t, TypeResponse)
	if !checker.CheckMAC1(respBytes) {
		t.Fatal("wireguard-go's response fails our MAC1 check")
	}
	resp, err := ParseResponse(respBytes)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Receiver != 0x01020304 {
		t.Fatalf("response receiver %#x", resp.Receiver)
	}
	if err := h.ConsumeResponse(&resp, now); err != nil {
		t.Fatal(err)
	}
	kp, err := h.DeriveKeypair(now)
	if err != nil {
		t.Fatal(err)
	}
	if !kp.Initiator || kp.LocalIndex != 0x01020304 || kp.RemoteIndex != resp.Sender {
		t.Fatalf("keypair %+v", kp)
	}
	// wireguard-go holds its keypair as unconfirmed until our first
	// message: send first.
	exchangeData(t, w, kp, true)
}

func handshakeWireGuardGoInitiates(t *testing.T, w *wgPeer, ours *Static, wgPub PublicKey, psk PresharedKey) {
	checker := NewCookieChecker(ours.Public, rand.Reader)
	gen := NewCookieGenerator(wgPub)
	now := time.Now()
	pkt := ipv4Packet(wgTunnelAddr, ourTunnelAddr, "staged until the handshake is done")
	w.tun.Outbound <- pkt
	initBytes := w.recv(t, TypeInitiation)
	if !checker.CheckMAC1(initBytes) {
		t.Fatal("wireguard-go's initiation fails our MAC1 check")
	}
	init, err := ParseInitiation(initBytes)
	if err != nil {
		t.Fatal(err)
	}
	info, err := OpenInitiation(ours, &init)
	if err != nil {
		t.Fatal(err)
	}
	if info.Remote != wgPub {
		t.Fatal("initiation opened to the wrong static key")
	}
	h := NewHandshake(ours, wgPub, psk)
	if err := h.AcceptInitiation(&info, now); err != nil {
		t.Fatal(err)
	}
	resp, err := h.CreateResponse(rand.Reader, 0x05060708)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.AppendTo(nil)
	gen.AddMACs(msg, now)
	kp, err := h.DeriveKeypair(now)
	if err != nil {
		t.Fatal(err)
	}
	var kps Keypairs
	kps.Install(kp)
	if kps.Next != kp || kps.Current != nil || kp.Initiator {
		t.Fatal("responder keypair not pending confirmation")
	}
	w.deliver(t, msg)
	// The staged packet arrives under the new keys and confirms them.
	got := openTransport(t, kp, w.recv(t, TypeTransport))
	for len(got) == 0 { // a keepalive first is fine
		got = openTransport(t, kp, w.recv(t, TypeTransport))
	}
	assertBytes(t, "wireguard-go's staged packet", got[:len(pkt)], pkt)
	kps.Confirm(kp)
	if kps.Current != kp {
		t.Fatal("keypair not confirmed")
	}
	exchangeData(t, w, kp, false)
}

// exchangeData sends a packet each way through wireguard-go under kp.
func exchangeData(t *testing.T, w *wgPeer, kp *Keypair, weSendFirst bool) {
	t.Helper()
	out := ipv4Packet(ourTunnelAddr, wgTunnelAddr, "hello from fips-go")
	in := ipv4Packet(wgTunnelAddr, ourTunnelAddr, "hello from wireguard-go")
	send := func() {
		w.deliver(t, sealTransport(t, kp, out))
		assertBytes(t, "our packet at wireguard-go's TUN", w.tunRead(t), out)
	}
	receive := func() {
		w.tun.Outbound <- in
		got := openTransport(t, kp, w.recv(t, TypeTransport))
		if len(got) < len(in) || len(got)%16 != 0 {
			t.Fatalf("wireguard-go's packet: %d bytes, want %d padded to 16", len(got), len(in))
		}
		assertBytes(t, "wireguard-go's packet", got[:len(in)], in)
	}
	if weSendFirst {
		send()
		receive()
	} else {
		receive()
		send()
	}
}

func assertBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n got  %x\n want %x", what, got, want)
	}
}
