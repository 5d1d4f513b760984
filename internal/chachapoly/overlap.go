package chachapoly

import "unsafe"

// inexactOverlap reports whether x and y share memory anywhere but at the
// same start: in-place use (the same first byte) is allowed, a shifted
// overlap would let the output overwrite input not yet read.
func inexactOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 || &x[0] == &y[0] {
		return false
	}
	x0, x1 := uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(&x[len(x)-1]))
	y0, y1 := uintptr(unsafe.Pointer(&y[0])), uintptr(unsafe.Pointer(&y[len(y)-1]))
	return x0 <= y1 && y0 <= x1
}
