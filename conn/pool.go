package conn

// freeList is a bounded pool of reusable scratch objects. Unlike sync.Pool
// it never allocates after construction and never grows: when every entry
// is in use, get waits for one to come back, which is the backpressure the
// design asks for instead of unbounded memory.
type freeList[T any] struct {
	c chan *T
}

// newFreeList builds n entries up front with newT.
func newFreeList[T any](n int, newT func() *T) *freeList[T] {
	f := &freeList[T]{c: make(chan *T, n)}
	for range n {
		f.c <- newT()
	}
	return f
}

// get takes an entry, waiting while all are in use.
func (f *freeList[T]) get() *T { return <-f.c }

// put returns an entry taken with get.
func (f *freeList[T]) put(x *T) { f.c <- x }
