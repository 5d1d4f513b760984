//go:build linux

package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"
)

// buildEcho writes an IPv4 ICMP echo request from src to the gateway's
// tunnel address into b, with id, seq and a payload that starts with sent;
// it returns its length.
//
//	IPv4 (20) | type 8, code 0, checksum, id, seq (8) | sent (8) | zeros
func buildEcho(b []byte, src [4]byte, id, seq uint16, sent int64, payload int) int {
	n := 20 + 8 + payload
	ip := b[:20]
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], uint16(n))
	binary.BigEndian.PutUint16(ip[4:], seq)
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ip[8], ip[9] = 64, 1                       // TTL, ICMP
	ip[10], ip[11] = 0, 0
	copy(ip[12:], src[:])
	copy(ip[16:], gatewayInner[:])
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	ic := b[20:n]
	ic[0], ic[1], ic[2], ic[3] = 8, 0, 0, 0
	binary.BigEndian.PutUint16(ic[4:], id)
	binary.BigEndian.PutUint16(ic[6:], seq)
	binary.BigEndian.PutUint64(ic[8:], uint64(sent))
	clear(ic[16:])
	binary.BigEndian.PutUint16(ic[2:], checksum(ic))
	return n
}

// parseEchoReply checks that pt is the gateway's echo reply to peer dst
// (id, and the addresses) and returns the send time it carries and the
// packet's length.
func parseEchoReply(pt []byte, dst [4]byte, id uint16) (sent int64, n int, ok bool) {
	if len(pt) < 20+16 || pt[0] != 0x45 || pt[9] != 1 {
		return 0, 0, false
	}
	n = int(binary.BigEndian.Uint16(pt[2:]))
	if n < 20+16 || n > len(pt) || [4]byte(pt[12:16]) != gatewayInner || [4]byte(pt[16:20]) != dst {
		return 0, 0, false
	}
	ic := pt[20:n]
	if ic[0] != 0 || binary.BigEndian.Uint16(ic[4:]) != id || checksum(ic) != 0 {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(ic[8:])), n, true
}

// checksum is the Internet checksum of b.
func checksum(b []byte) uint16 {
	var s uint32
	for ; len(b) >= 2; b = b[2:] {
		s += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// event is a peer's next due time in the schedule; gen tells a stale
// entry (the peer was rescheduled since) from its live one.
type event struct {
	at   time.Duration
	peer int32
	gen  uint32
}

// eventHeap is a min-heap of events by time, at most one live entry per
// peer plus stale ones that are dropped when popped.
type eventHeap []event

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		up := (i - 1) / 2
		if a[up].at <= a[i].at {
			break
		}
		a[up], a[i] = a[i], a[up]
		i = up
	}
}

// popDue appends every event due by now to dst.
func (h *eventHeap) popDue(now time.Duration, dst []event) []event {
	for len(*h) > 0 && (*h)[0].at <= now {
		a := *h
		dst = append(dst, a[0])
		last := len(a) - 1
		a[0] = a[last]
		a = a[:last]
		for i := 0; ; {
			l, m := 2*i+1, i
			if l < len(a) && a[l].at < a[m].at {
				m = l
			}
			if r := l + 1; r < len(a) && a[r].at < a[m].at {
				m = r
			}
			if m == i {
				break
			}
			a[i], a[m] = a[m], a[i]
			i = m
		}
		*h = a
	}
	return dst
}

// histogram counts durations in buckets of 1/8 of a power of two
// nanoseconds (12% wide at most), for percentiles of many samples.
type histogram [64 * 8]atomic.Uint64

func bucket(d time.Duration) int {
	if d < 8 {
		return int(d)
	}
	e := bits.Len64(uint64(d)) - 1
	return e*8 + int(uint64(d)>>(e-3)&7)
}

func (h *histogram) add(d time.Duration) { h[bucket(d)].Add(1) }

// quantile is the upper bound of the bucket that holds the q quantile.
func (h *histogram) quantile(q float64) time.Duration {
	var total uint64
	for i := range h {
		total += h[i].Load()
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var acc uint64
	for i := range h {
		acc += h[i].Load()
		if acc >= want {
			if i < 8 {
				return time.Duration(i)
			}
			e, m := i/8, i%8
			return time.Duration((uint64(8+m) + 1) << (e - 3))
		}
	}
	return 0
}

// report is what a run found, printed as one JSON object on stdout.
type report struct {
	Peers            int     `json:"peers"`
	Established      int     `json:"established"`
	Done             int     `json:"done"`
	StormSeconds     float64 `json:"storm_s"`
	RunSeconds       float64 `json:"run_s"`
	T50              float64 `json:"t50_s"` // since the storm's start, -1: not reached
	T99              float64 `json:"t99_s"`
	T100             float64 `json:"t100_s"`
	LatencyP50ms     float64 `json:"hs_latency_p50_ms"`
	LatencyP99ms     float64 `json:"hs_latency_p99_ms"`
	LatencyMaxms     float64 `json:"hs_latency_max_ms"`
	Initiations      uint64  `json:"initiations"`
	Retries          uint64  `json:"retries"`
	CookieReplies    uint64  `json:"cookie_replies"`
	CookieBad        uint64  `json:"cookie_replies_bad"`
	PeersWithCookie  int     `json:"peers_with_cookie"`
	StaleResponses   uint64  `json:"stale_responses"`
	PingsSent        uint64  `json:"pings_sent"`
	Replies          uint64  `json:"ping_replies"`
	LossPct          float64 `json:"loss_pct"`
	GoodputMbps      float64 `json:"goodput_mbps"` // echo replies' inner bytes, all peers, over the run
	PeerGoodputMinK  float64 `json:"peer_goodput_min_kbps"`
	PeerGoodputP10K  float64 `json:"peer_goodput_p10_kbps"`
	PeerGoodputMedK  float64 `json:"peer_goodput_median_kbps"`
	RTTP50ms         float64 `json:"rtt_p50_ms"`
	RTTP99ms         float64 `json:"rtt_p99_ms"`
	KeepalivesIn     uint64  `json:"keepalives_in"`
	KeepalivesOut    uint64  `json:"keepalives_out"`
	BadPackets       uint64  `json:"bad_packets"`
	SendErrors       uint64  `json:"send_errors"`
	Sent             uint64  `json:"datagrams_sent"`
	Received         uint64  `json:"datagrams_received"`
	PeersWithoutPing int     `json:"peers_without_reply"`
	GatewayInits     uint64  `json:"gateway_initiations"`
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func (s *sim) report(end time.Duration) *report {
	r := &report{Peers: s.o.n, StormSeconds: s.o.storm.Seconds(), RunSeconds: end.Seconds()}
	var estab, lat []time.Duration
	var goodput []float64
	var replyBytes uint64
	for i := range s.peers {
		p := &s.peers[i]
		p.mu.Lock()
		if p.established >= 0 {
			estab = append(estab, p.established)
			lat = append(lat, p.established-p.firstInit)
			if s.o.rate > 0 {
				win := (end - p.established).Seconds()
				goodput = append(goodput, float64(p.replyBytes)*8/1e3/max(win, 1e-3))
			}
		}
		if p.doneAt >= 0 {
			r.Done++
		}
		if p.cookies > 0 {
			r.PeersWithCookie++
		}
		if s.o.rate > 0 && p.replies == 0 {
			r.PeersWithoutPing++
		}
		replyBytes += p.replyBytes
		p.mu.Unlock()
	}
	r.Established = len(estab)
	slices.Sort(estab)
	slices.Sort(lat)
	slices.Sort(goodput)
	at := func(q float64) float64 { // time until q of all peers had a session
		k := int(math.Ceil(q*float64(s.o.n))) - 1
		if k >= len(estab) {
			return -1
		}
		return estab[k].Seconds()
	}
	r.T50, r.T99, r.T100 = at(0.5), at(0.99), at(1)
	if len(lat) > 0 {
		r.LatencyP50ms = ms(lat[len(lat)/2])
		r.LatencyP99ms = ms(lat[min(len(lat)-1, len(lat)*99/100)])
		r.LatencyMaxms = ms(lat[len(lat)-1])
	}
	if len(goodput) > 0 {
		r.PeerGoodputMinK = goodput[0]
		r.PeerGoodputP10K = goodput[len(goodput)/10]
		r.PeerGoodputMedK = goodput[len(goodput)/2]
	}
	c := &s.c
	r.Initiations, r.Retries = c.initiations.Load(), c.retries.Load()
	r.CookieReplies, r.CookieBad, r.StaleResponses = c.cookieReplies.Load(), c.cookieBad.Load(), c.staleResponses.Load()
	r.PingsSent, r.Replies = c.pingsSent.Load(), c.replies.Load()
	if r.PingsSent > 0 {
		r.LossPct = 100 * (1 - float64(r.Replies)/float64(r.PingsSent))
	}
	r.GoodputMbps = float64(replyBytes) * 8 / 1e6 / max(end.Seconds(), 1e-3)
	r.RTTP50ms, r.RTTP99ms = ms(s.rtt.quantile(0.5)), ms(s.rtt.quantile(0.99))
	r.KeepalivesIn, r.KeepalivesOut = c.keepalivesIn.Load(), c.keepalivesOut.Load()
	r.BadPackets, r.SendErrors = c.badPackets.Load(), c.sendErrors.Load()
	r.Sent, r.Received = c.sent.Load(), c.received.Load()
	r.GatewayInits = c.gatewayInitiations.Load()
	return r
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "peersim: %d peers, storm %.1f s, run %.1f s: %d established, %d done\n",
		r.Peers, r.StormSeconds, r.RunSeconds, r.Established, r.Done)
	fmt.Fprintf(w, "  sessions at 50%%/99%%/100%%: %.2f/%.2f/%.2f s; handshake latency p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		r.T50, r.T99, r.T100, r.LatencyP50ms, r.LatencyP99ms, r.LatencyMaxms)
	fmt.Fprintf(w, "  initiations %d (retries %d), cookie replies %d (%d peers, %d not accepted), stale responses %d\n",
		r.Initiations, r.Retries, r.CookieReplies, r.PeersWithCookie, r.CookieBad, r.StaleResponses)
	fmt.Fprintf(w, "  echo: %d sent, %d replies, loss %.2f%%, goodput %.2f Mbit/s, per peer min/p10/median %.1f/%.1f/%.1f kbit/s, RTT p50 %.2f ms p99 %.2f ms\n",
		r.PingsSent, r.Replies, r.LossPct, r.GoodputMbps, r.PeerGoodputMinK, r.PeerGoodputP10K, r.PeerGoodputMedK, r.RTTP50ms, r.RTTP99ms)
	fmt.Fprintf(w, "  datagrams sent %d, received %d, send errors %d, bad %d, keepalives in/out %d/%d, gateway's initiations %d\n",
		r.Sent, r.Received, r.SendErrors, r.BadPackets, r.KeepalivesIn, r.KeepalivesOut, r.GatewayInits)
}
