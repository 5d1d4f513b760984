package metrics_test

import (
	"bytes"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/app/metrics"
)

// TestRuntimeAndProcessSeries: the go_* and process_* series parse, with
// their types, and say something true of this process.
func TestRuntimeAndProcessSeries(t *testing.T) {
	var b bytes.Buffer
	metrics.NewHandler(nil).WritePrometheus(&b)
	fams := parse(t, b.Bytes())
	positive := []string{"go_goroutines", "go_threads", "go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes", "go_memstats_alloc_bytes_total"}
	present := []string{"go_gc_cycles_total", "go_info"}
	if runtime.GOOS == "linux" {
		positive = append(positive, "process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds", "process_max_fds", "process_resident_memory_peak_bytes", "process_start_time_seconds")
		present = append(present, "process_cpu_seconds_total", "process_resident_memory_anon_bytes", "process_resident_memory_file_bytes")
	}
	for _, name := range positive {
		if v := value(fams, name); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	for _, name := range present {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	if runtime.GOOS == "linux" {
		start := time.Unix(int64(value(fams, "process_start_time_seconds")), 0)
		if time.Since(start) < 0 || time.Since(start) > 24*time.Hour {
			t.Errorf("process_start_time_seconds says %v", start)
		}
		if rss, peak := value(fams, "process_resident_memory_bytes"), value(fams, "process_resident_memory_peak_bytes"); rss > peak {
			t.Errorf("RSS %v above its peak %v", rss, peak)
		}
	}
}

// TestRuntimeSeriesAllocationsBounded: a scrape of the runtime and the
// process allocates a fixed amount, not more as the process runs.
func TestRuntimeSeriesAllocationsBounded(t *testing.T) {
	h := metrics.NewHandler(nil)
	h.WritePrometheus(io.Discard) // the start time, read once
	allocs := testing.AllocsPerRun(20, func() { h.WritePrometheus(io.Discard) })
	if allocs > 200 {
		t.Errorf("%v allocations a scrape", allocs)
	}
	t.Logf("%v allocations a scrape", allocs)
}
