package device

import "sync/atomic"

// counterID names one of the device's own counters. Every drop on the data
// path has a reason here, and the whole set is visible in `fips-go show`.
type counterID int

const (
	cRxGarbage counterID = iota
	cRxUnknownIndex
	cRxDecryptFailed
	cRxReplayed
	cRxExpiredKeypair
	cRxBadSource
	cRxMalformedInner
	cRxHandshakeQueueFull
	cRxHandshakeBadMAC
	cRxHandshakeRejected
	cRxHandshakeRateLimited
	cRxHandshakeReadsPaused
	cRxCookieReplies
	cTxNoRoute
	cTxNoEndpoint
	cTxStagedDropped
	cTxSendErrors
	cTxTooBig
	cHandshakeInitiationsSent
	cHandshakeInitiationsReceived
	cHandshakeResponsesSent
	cHandshakeResponsesReceived
	cHandshakesCompleted
	cHandshakeGaveUp
	cCookieRepliesSent
	cKeepalivesSent
	cKeysZeroed
	cTxSealFailed
	cRxPeerRemoved
	cRxTooBig
	cTxTUNReadErrors
	cTxTUNReadPanics
	cRxReceiveErrors
	cRxTUNWriteErrors
	cTxAQMDrops
	cTxAQMMarks
	cRxAQMDrops
	cRxAQMMarks
	cTxPackets
	cRxPackets
	cTxTUNReads
	cTxTUNReadBytes
	cRxObfsDropped
	cTxPMTUSignals
	cTxMSSClamped
	cRxMSSClamped
	cTxPMTUProbes
	cRxPMTUProbes
	cRxPMTUAcks
	cTxPMTUTCPBlackHoles
	cTxPMTUDFSamples
	cResumeInitiations
	cSessionsResumed
	numCounters
)

var counterNames = [numCounters]string{
	cRxGarbage:                    "rx_drop_garbage",
	cRxUnknownIndex:               "rx_drop_unknown_index",
	cRxDecryptFailed:              "rx_drop_decrypt_failed",
	cRxReplayed:                   "rx_drop_replayed",
	cRxExpiredKeypair:             "rx_drop_expired_keypair",
	cRxBadSource:                  "rx_drop_source_not_allowed",
	cRxMalformedInner:             "rx_drop_malformed_inner",
	cRxHandshakeQueueFull:         "rx_drop_handshake_queue_full",
	cRxHandshakeBadMAC:            "rx_drop_handshake_bad_mac",
	cRxHandshakeRejected:          "rx_drop_handshake_rejected",
	cRxHandshakeRateLimited:       "rx_drop_handshake_rate_limited",
	cRxHandshakeReadsPaused:       "rx_handshake_reads_paused",
	cRxCookieReplies:              "rx_cookie_replies",
	cTxNoRoute:                    "tx_drop_no_route",
	cTxNoEndpoint:                 "tx_drop_no_endpoint",
	cTxStagedDropped:              "tx_drop_staged_overflow",
	cTxSendErrors:                 "tx_send_errors",
	cTxTooBig:                     "tx_drop_too_big",
	cHandshakeInitiationsSent:     "handshake_initiations_sent",
	cHandshakeInitiationsReceived: "handshake_initiations_received",
	cHandshakeResponsesSent:       "handshake_responses_sent",
	cHandshakeResponsesReceived:   "handshake_responses_received",
	cHandshakesCompleted:          "handshakes_completed",
	cHandshakeGaveUp:              "handshake_attempts_gave_up",
	cCookieRepliesSent:            "cookie_replies_sent",
	cKeepalivesSent:               "keepalives_sent",
	cKeysZeroed:                   "keys_zeroed",
	cTxSealFailed:                 "tx_drop_seal_failed",
	cRxPeerRemoved:                "rx_drop_peer_removed",
	cRxTooBig:                     "rx_drop_too_big",
	cTxTUNReadErrors:              "tx_tun_read_errors",
	cTxTUNReadPanics:              "tx_tun_read_panics",
	cRxReceiveErrors:              "rx_receive_errors",
	cRxTUNWriteErrors:             "rx_tun_write_errors",
	cTxAQMDrops:                   "tx_aqm_drops",
	cTxAQMMarks:                   "tx_aqm_ecn_marks",
	cRxAQMDrops:                   "rx_aqm_drops",
	cRxAQMMarks:                   "rx_aqm_ecn_marks",
	cTxPackets:                    "tx_packets",
	cRxPackets:                    "rx_packets",
	cTxTUNReads:                   "tx_tun_reads",
	cTxTUNReadBytes:               "tx_tun_read_bytes",
	cRxObfsDropped:                "rx_drop_obfuscation",
	cTxPMTUSignals:                "tx_pmtu_icmp_sent",
	cTxMSSClamped:                 "tx_mss_clamped",
	cRxMSSClamped:                 "rx_mss_clamped",
	cTxPMTUProbes:                 "tx_pmtu_probes",
	cRxPMTUProbes:                 "rx_pmtu_probes_answered",
	cRxPMTUAcks:                   "rx_pmtu_probe_acks",
	cTxPMTUTCPBlackHoles:          "tx_pmtu_tcp_black_holes",
	cTxPMTUDFSamples:              "tx_pmtu_df_samples",
	cResumeInitiations:            "resume_initiations_sent",
	cSessionsResumed:              "sessions_resumed",
}

// counters is the device's set; each is cumulative and updated atomically.
// Per-packet drop paths add once per batch where they can.
type counters [numCounters]atomic.Uint64

func (c *counters) add(id counterID, n uint64) { c[id].Add(n) }
func (c *counters) inc(id counterID)           { c[id].Add(1) }

func (c *counters) snapshot() []Counter {
	out := make([]Counter, 0, numCounters)
	for i := range c {
		out = append(out, Counter{Name: counterNames[i], Value: c[i].Load()})
	}
	return out
}
