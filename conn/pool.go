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

// lazyList is a freeList that builds its entries on first use, so memory
// that only some workloads need costs nothing until one does. It never
// holds more than n; get waits once all n exist and are in use.
type lazyList[T any] struct {
	c    chan *T
	made chan struct{} // one token per entry still to build
	newT func() *T
}

func newLazyList[T any](n int, newT func() *T) *lazyList[T] {
	l := &lazyList[T]{c: make(chan *T, n), made: make(chan struct{}, n), newT: newT}
	for range n {
		l.made <- struct{}{}
	}
	return l
}

// get takes a free entry, builds one while fewer than n exist, and waits
// otherwise; it gives up (nil) once quit is closed.
func (l *lazyList[T]) get(quit <-chan struct{}) *T {
	select {
	case x := <-l.c:
		return x
	default:
	}
	select {
	case x := <-l.c:
		return x
	case <-l.made:
		return l.newT()
	case <-quit:
		return nil
	}
}

// tryGet is get without the wait: nil when all n exist and are in use.
func (l *lazyList[T]) tryGet() *T {
	select {
	case x := <-l.c:
		return x
	case <-l.made:
		return l.newT()
	default:
		return nil
	}
}

// put returns an entry taken with get.
func (l *lazyList[T]) put(x *T) { l.c <- x }
