//go:build linux

package flood

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The attacker process. The test binary re-executes itself inside the
// attacker's namespace with attackerEnv set to a JSON attackSpec. It opens
// its sockets, prints "ready", floods until its stdin closes, then prints
// "result {json attackResult}".
const attackerEnv = "FIPS_FLOOD_ATTACKER"

type attackSpec struct {
	Victim    string `json:"victim"`     // ip:port the initiations go to
	VictimPub string `json:"victim_pub"` // base64 public key the MAC1 is for
	Sources   string `json:"sources"`    // prefix of spoofed source addresses
	Single    bool   `json:"single"`     // one source address only
	Cookies   bool   `json:"cookies"`    // answer cookie replies: later packets carry MAC2
	SrcPort   uint16 `json:"src_port"`   // every source's UDP port; replies come back to it
}

type attackResult struct {
	Sent          uint64  `json:"sent"`
	SendErrors    uint64  `json:"send_errors"`
	Seconds       float64 `json:"seconds"`
	CookieReplies uint64  `json:"cookie_replies"` // received from the victim
	CookiesOpened uint64  `json:"cookies_opened"` // of those, decrypted and kept
	OtherReplies  uint64  `json:"other_replies"`
	Err           string  `json:"err,omitempty"`
	// CPUSeconds is the attacker process's user and system time, filled in
	// by the test from the exited process. "kept" compares each row with
	// the closed-port flood, which assumes every row's attacker takes the
	// same share of the two cores; this shows whether it did.
	CPUSeconds float64 `json:"-"`
}

func attackerMain(specJSON string) int {
	var s attackSpec
	res, err := func() (attackResult, error) {
		if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
			return attackResult{}, fmt.Errorf("bad spec: %w", err)
		}
		return attack(s, func() { fmt.Println("ready") }, waitStdinClosed)
	}()
	if err != nil {
		res.Err = err.Error()
	}
	b, _ := json.Marshal(res)
	fmt.Printf("result %s\n", b)
	if err != nil {
		return 1
	}
	return 0
}

func waitStdinClosed() {
	r := bufio.NewReader(os.Stdin)
	for {
		if _, err := r.ReadByte(); err != nil {
			return
		}
	}
}

// attack floods until wait returns. ready is called once the sockets are open.
func attack(s attackSpec, ready, wait func()) (attackResult, error) {
	victim, err := netip.ParseAddrPort(s.Victim)
	if err != nil {
		return attackResult{}, err
	}
	src, err := netip.ParsePrefix(s.Sources)
	if err != nil {
		return attackResult{}, err
	}
	pubb, err := base64.StdEncoding.DecodeString(s.VictimPub)
	if err != nil || len(pubb) != 32 {
		return attackResult{}, fmt.Errorf("bad victim key %q", s.VictimPub)
	}
	f, err := newForge(victim, [32]byte(pubb), src, s.Single, s.SrcPort, uint64(time.Now().UnixNano()))
	if err != nil {
		return attackResult{}, err
	}
	fd, err := rawSocket(victim.Addr())
	if err != nil {
		return attackResult{}, err
	}
	defer unix.Close(fd)
	// Replies to the spoofed sources are routed back into this namespace,
	// where the whole source prefix is local: one socket gets them all.
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{Port: int(s.SrcPort)})
	if err != nil {
		return attackResult{}, err
	}
	var res attackResult
	var wg sync.WaitGroup
	var cookies, opened, other atomic.Uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		receiveReplies(uc, f, s.Cookies, &cookies, &opened, &other)
	}()
	var stop atomic.Bool
	sendDone := make(chan struct{})
	ready()
	start := time.Now()
	go func() {
		defer close(sendDone)
		res.Sent, res.SendErrors = sendLoop(fd, f, &stop)
	}()
	wait()
	stop.Store(true)
	<-sendDone
	res.Seconds = time.Since(start).Seconds()
	time.Sleep(200 * time.Millisecond) // replies still in flight
	uc.Close()
	wg.Wait()
	res.CookieReplies, res.CookiesOpened, res.OtherReplies = cookies.Load(), opened.Load(), other.Load()
	return res, nil
}

func receiveReplies(uc *net.UDPConn, f *forge, answer bool, cookies, opened, other *atomic.Uint64) {
	buf := make([]byte, 2048)
	for {
		n, err := uc.Read(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if !answer {
			if n == cookieLen && buf[0] == typeCookieRep {
				cookies.Add(1)
			} else {
				other.Add(1)
			}
			continue
		}
		isCookie, ok := f.consumeReply(buf[:n], time.Now())
		switch {
		case !isCookie:
			other.Add(1)
		case ok:
			cookies.Add(1)
			opened.Add(1)
		default:
			cookies.Add(1)
		}
	}
}

// rawSocket opens an IPv4 raw socket that takes whole datagrams
// (IPPROTO_RAW implies IP_HDRINCL), connected to dst so sendmmsg needs no
// addresses.
func rawSocket(dst netip.Addr) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		return -1, fmt.Errorf("raw socket (needs CAP_NET_RAW): %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.As4()}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect raw socket: %w", err)
	}
	// A deep send buffer keeps sendmmsg from stopping short.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	return fd, nil
}

const sendBatch = 64

// sendLoop sends batches of forged packets with sendmmsg until stop.
func sendLoop(fd int, f *forge, stop *atomic.Bool) (sent, errs uint64) {
	bufs := make([][packetLen]byte, sendBatch)
	iovs := make([]unix.Iovec, sendBatch)
	msgs := make([]unix.Mmsghdr, sendBatch)
	for i := range msgs {
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(packetLen)
		msgs[i].Hdr.Iov = &iovs[i]
		msgs[i].Hdr.SetIovlen(1)
	}
	var seq uint32
	for !stop.Load() {
		now := time.Now()
		f.mu.Lock()
		for i := range bufs {
			f.build(bufs[i][:], seq, now)
			seq++
		}
		f.mu.Unlock()
		for off := 0; off < sendBatch; {
			n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd),
				uintptr(unsafe.Pointer(&msgs[off])), uintptr(sendBatch-off), 0, 0, 0)
			if e != 0 {
				errs++
				if e == unix.ENOBUFS || e == unix.EAGAIN || e == unix.EINTR {
					time.Sleep(50 * time.Microsecond)
					continue
				}
				break // the rest of this batch is lost; count and go on
			}
			off += int(n)
			sent += uint64(n)
		}
	}
	return sent, errs
}
