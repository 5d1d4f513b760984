package metrics

import (
	"runtime"
	rtmetrics "runtime/metrics"
)

// The go_* series, read with runtime/metrics, which unlike
// runtime.ReadMemStats does not stop the world. Names follow the ones
// Prometheus users know from client_golang where one exists (the
// go_memstats_* family is derived as client_golang derives it).

// runtimeNames are the runtime/metrics read per scrape, indexed by the
// rt* constants.
var runtimeNames = [...]string{
	rtGoroutines:    "/sched/goroutines:goroutines",
	rtThreads:       "/sched/threads/total:threads",
	rtGomaxprocs:    "/sched/gomaxprocs:threads",
	rtGCCycles:      "/gc/cycles/total:gc-cycles",
	rtGCCPU:         "/cpu/classes/gc/total:cpu-seconds",
	rtGOGC:          "/gc/gogc:percent",
	rtGomemlimit:    "/gc/gomemlimit:bytes",
	rtHeapGoal:      "/gc/heap/goal:bytes",
	rtHeapObjects:   "/memory/classes/heap/objects:bytes",
	rtHeapUnused:    "/memory/classes/heap/unused:bytes",
	rtHeapFree:      "/memory/classes/heap/free:bytes",
	rtHeapReleased:  "/memory/classes/heap/released:bytes",
	rtHeapStacks:    "/memory/classes/heap/stacks:bytes",
	rtTotal:         "/memory/classes/total:bytes",
	rtLiveObjects:   "/gc/heap/objects:objects",
	rtAllocBytes:    "/gc/heap/allocs:bytes",
	rtAllocObjects:  "/gc/heap/allocs:objects",
	rtFreeObjects:   "/gc/heap/frees:objects",
	rtTinyAllocs:    "/gc/heap/tiny/allocs:objects",
	rtGoroutinesNew: "/sched/goroutines-created:goroutines",
}

const (
	rtGoroutines = iota
	rtThreads
	rtGomaxprocs
	rtGCCycles
	rtGCCPU
	rtGOGC
	rtGomemlimit
	rtHeapGoal
	rtHeapObjects
	rtHeapUnused
	rtHeapFree
	rtHeapReleased
	rtHeapStacks
	rtTotal
	rtLiveObjects
	rtAllocBytes
	rtAllocObjects
	rtFreeObjects
	rtTinyAllocs
	rtGoroutinesNew
	rtCount
)

// runtimeSeries adds the go_* series. A metric this Go release lacks is
// left out.
func runtimeSeries(e *exposition) {
	var s [rtCount]rtmetrics.Sample
	for i := range s {
		s[i].Name = runtimeNames[i]
	}
	rtmetrics.Read(s[:])
	ok := func(i ...int) bool {
		for _, j := range i {
			if k := s[j].Value.Kind(); k != rtmetrics.KindUint64 && k != rtmetrics.KindFloat64 {
				return false
			}
		}
		return true
	}
	u := func(i int) uint64 {
		if s[i].Value.Kind() == rtmetrics.KindFloat64 {
			return uint64(s[i].Value.Float64())
		}
		return s[i].Value.Uint64()
	}
	f := func(i int) float64 {
		if s[i].Value.Kind() == rtmetrics.KindFloat64 {
			return s[i].Value.Float64()
		}
		return float64(s[i].Value.Uint64())
	}
	gauge := func(name, help string, i ...int) {
		if !ok(i...) {
			return
		}
		var v float64
		for _, j := range i {
			v += f(j)
		}
		e.gauge(name, help, v, "")
	}
	counter := func(name, help string, i ...int) {
		if !ok(i...) {
			return
		}
		var v uint64
		for _, j := range i {
			v += u(j)
		}
		e.counter(name, help, v, "")
	}
	e.gauge("go_info", "The Go release the binary was built with.", 1, labels("", "version", runtime.Version()))
	gauge("go_goroutines", "Goroutines that currently exist.", rtGoroutines)
	counter("go_goroutines_created_total", "Goroutines created since the process started.", rtGoroutinesNew)
	gauge("go_threads", "OS threads the Go runtime has.", rtThreads)
	gauge("go_sched_gomaxprocs_threads", "GOMAXPROCS.", rtGomaxprocs)
	counter("go_gc_cycles_total", "Completed GC cycles.", rtGCCycles)
	if ok(rtGCCPU) {
		e.add("go_gc_cpu_seconds_total", kindCounter, "Estimated CPU time spent on GC.", sample{v: floatValue(f(rtGCCPU))})
	}
	gauge("go_gc_gogc_percent", "The GOGC setting.", rtGOGC)
	gauge("go_gc_gomemlimit_bytes", "The GOMEMLIMIT setting.", rtGomemlimit)
	gauge("go_memstats_next_gc_bytes", "Heap size the next GC cycle aims for.", rtHeapGoal)
	gauge("go_memstats_heap_alloc_bytes", "Bytes of allocated heap objects, live or not yet swept.", rtHeapObjects)
	gauge("go_memstats_heap_inuse_bytes", "Bytes of heap spans in use.", rtHeapObjects, rtHeapUnused)
	gauge("go_memstats_heap_idle_bytes", "Bytes of heap spans not in use, returned to the OS or not.", rtHeapFree, rtHeapReleased)
	gauge("go_memstats_heap_released_bytes", "Bytes of heap returned to the OS.", rtHeapReleased)
	gauge("go_memstats_heap_objects", "Allocated heap objects.", rtLiveObjects)
	gauge("go_memstats_stack_inuse_bytes", "Bytes of stack spans in use.", rtHeapStacks)
	gauge("go_memstats_sys_bytes", "Bytes of memory the Go runtime has mapped.", rtTotal)
	counter("go_memstats_alloc_bytes_total", "Bytes allocated on the heap since the process started.", rtAllocBytes)
	counter("go_memstats_mallocs_total", "Heap objects allocated since the process started.", rtAllocObjects, rtTinyAllocs)
	counter("go_memstats_frees_total", "Heap objects freed since the process started.", rtFreeObjects, rtTinyAllocs)
}
