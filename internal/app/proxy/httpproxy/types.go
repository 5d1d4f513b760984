package httpproxy

import "github.com/fips-go/fips-go/internal/app/http1"

// The message heads the proxy reads and writes; see package http1.
type (
	// Header is the field lines of a head in the order received.
	Header = http1.Header
	// Field is one field line.
	Field    = http1.Field
	request  = http1.Request
	response = http1.Response
)
